"""One SparkSession per check, sized for a small box.

Why these settings: the default 200 shuffle partitions turn every groupBy of a test-sized
history into 200 empty tasks, and the UI/log noise costs seconds on a shared 2-core machine.
A ``--spark-master spark://...`` URL runs the identical job on a standalone cluster.
"""
from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"


def session_running() -> bool:
    """Whether this process already has a running Spark context.

    Why: ``getOrCreate`` hands every caller in one process the same session, so a caller that
    stops "its" session ends everyone's (a notebook's, the test suite's shared one). A caller
    asks this before :func:`make_session` and stops the session only when it started it."""
    return SparkContext._active_spark_context is not None


def make_session(master: str | None = None, app_name: str = "faultline-checker",
                 shuffle_partitions: int | None = None,
                 driver_memory: str = "2g") -> SparkSession:
    """Build (or reuse) a SparkSession configured for a 2-core box unless told otherwise."""
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ   # launched by spark-submit: it chose the master
    master = master or os.environ.get("FAULTLINE_SPARK_MASTER") or (None if under_submit else DEFAULT_MASTER)
    parts = shuffle_partitions or int(os.environ.get("FAULTLINE_SHUFFLE_PARTITIONS", "4"))
    if (master or "").startswith("local"):
        # Spark starts its Python workers as PYSPARK_PYTHON, else `python3` from PATH: from a
        # virtual environment used without activation (cron: .venv/bin/faultline) that is the
        # system's python3, without numpy or pyarrow. On this machine ours has them; a cluster's
        # workers bring their own.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    builder = (
        builder
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(parts))
        .config("spark.default.parallelism", str(parts))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.autoBroadcastJoinThreshold", str(32 * 1024 * 1024))
        # a session that checks many runs (benchmarks, the test suite) must not keep the plans
        # of every past query: the status store holds them even with the UI off
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.retainedJobs", "50")
        .config("spark.ui.retainedStages", "50")
    )
    if master and master.startswith("spark://"):
        # a small standalone worker: ask for what one 2-core worker can give
        builder = builder.config("spark.executor.memory", "1g").config("spark.cores.max", "2")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
