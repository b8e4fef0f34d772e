"""One SparkSession for the whole checker test session: Spark's start costs seconds."""
from __future__ import annotations

import pytest

from checkers.session import make_session


@pytest.fixture(scope="session")
def spark():
    s = make_session("local[2]", app_name="faultline-checker-tests")
    try:
        yield s
    finally:
        s.stop()
