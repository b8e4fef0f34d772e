"""The HTML loss report, the run index and junit.xml (docs/report.md).

Three entry points, each reading only a run directory's files (never kraftsim, never the
full history): :func:`write_report` → ``RUN/report.html``, :func:`write_junit` →
``RUN/junit.xml``, :func:`write_index` → ``RESULTS/index.html``. Bad input raises
:class:`ReportInputError` whose text is the one line to show the user. See docs/report.md.
"""
from harness.report.errors import ReportInputError
from harness.report.index import write_index
from harness.report.junit import write_junit
from harness.report.render import write_report

__all__ = ["write_report", "write_junit", "write_index", "ReportInputError"]
