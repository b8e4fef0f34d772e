"""``faultline suite SUITE.yaml``: a matrix of campaign runs, each cell with its expectation.

:mod:`harness.suite.spec` reads and validates suite files into cells;
:mod:`harness.suite.runner` runs the cells, checks them in one Spark session and keeps the
append-only suite log for ``--resume``. The command line is :mod:`harness.cli.suite`, the
index and JUnit file :mod:`harness.report.suite` (docs/suites.md).
"""
