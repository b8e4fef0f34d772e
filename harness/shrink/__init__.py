"""``faultline shrink RUN``: from a run that lost writes to the smallest campaign that still does.

:mod:`harness.shrink.shrinker` drives the search (replays, resumable log, outputs);
:mod:`harness.shrink.schedule` turns a run's recorded faults into targeted steps;
:mod:`harness.shrink.ddmin` cuts them down; :mod:`harness.shrink.judge` decides "still loses
by the same mechanism". The command line is :mod:`harness.cli.shrink`, the page
:mod:`harness.report.shrink` (docs/shrink.md).
"""
