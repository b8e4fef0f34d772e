"""One SparkSession per check, sized for a small box; started early, in the background.

Why these settings: the default 200 shuffle partitions turn every groupBy of a test-sized
history into 200 empty tasks, and the UI/log noise costs seconds on a shared 2-core machine.
A ``--spark-master spark://...`` URL runs the identical job on a standalone cluster: the
executors get the checker's code as a zip (:func:`ship_code`), so only Python, pyspark,
pyarrow, numpy and pandas must be installed on the workers.

Why a warm-up (:class:`SessionWarmup`): starting the JVM and forking the Python workers is most
of a small run's check (6-12 s on this box, against well under a second of analysis). The run
starts the session while its workload runs, so the verdict waits only for the analysis. The
workers are kept warm until the check takes the session, because Spark kills a Python worker
that sat idle for a minute (PythonWorkerFactory's idle-worker monitor; measured here: a warm
job 0.2 s, the same job after 75 s idle 2.3 s, with new worker pids).

Who stops a session: ``getOrCreate`` hands every caller in one process the same session, so a
caller stops it only when it started it (:func:`session_running`, asked under the same lock as
the start, :func:`start_session`).
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from groundwork.jvm_cds import archive_key

DEFAULT_MASTER = "local[2]"
#: seconds between the warm-up's keep-warm jobs: under Spark's one-minute idle-worker timeout
KEEP_WARM_S = 20.0
_LOCK = threading.RLock()
_REPO = Path(__file__).resolve().parents[1]
_shipped: str | None = None


#: extra options for the driver JVM (after the archive's and :data:`DRIVER_JIT`), e.g. ``-XX:TieredStopAtLevel=4``
OPTIONS_ENV = "FAULTLINE_SPARK_DRIVER_JAVA_OPTIONS"
#: the driver JVM compiles with C1 only. Why: the checker's analysis runs in Python workers; the
#: driver JVM plans small jobs and starts while the driver parses the history on the same cores,
#: and C2's compile threads took CPU from that parse. A first check of the 10M-record benchmark
#: history (benchmarks/checker_scale.py ``--scratch``, 29 Nov 2026, 2 cores, alternated):
#: 16.4 / 16.0 s with C2, 14.2 / 13.8 / 13.8 / 14.5 s with C1 only (the parse 11.0 -> 9.1 s); the
#: serial collector beside it changed nothing. While the test suite ran (about fifty sessions on
#: the same 2 cores) it cut a session's start from 11.9 to 6.2 CPU-s and a small first check from
#: 3.0 to 1.3 s. ``$FAULTLINE_SPARK_DRIVER_JAVA_OPTIONS`` comes after it:
#: ``-XX:TieredStopAtLevel=4`` gives C2 back.
DRIVER_JIT = "-XX:TieredStopAtLevel=1"
#: set only in checkers/jvm_archive.py's child that makes the archive: where its JVM writes the classes as it exits
archive_dump_to: str | None = None


def java_binary() -> str:
    """The java spark-submit runs (bin/spark-class: ``$JAVA_HOME/bin/java``, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else "java"


def archive_file() -> Path:
    """``$XDG_CACHE_HOME/faultline/spark-cds/<pyspark version>-<key>.jsa``: keyed by what the JVM
    would refuse the archive for (groundwork/jvm_cds.py: the java binary, each of pyspark's jars),
    so a virtual environment made again gets an archive of its own."""
    import pyspark
    key = archive_key(java_binary(), [Path(pyspark.__file__).parent / "jars"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "faultline" / "spark-cds" / f"{pyspark.__version__}-{key}.jsa"


def driver_java_options() -> str:
    """``spark.driver.extraJavaOptions`` for a session this process starts: the archive when
    there is one (or, in the child making it, where to write it), C1 only (:data:`DRIVER_JIT`), then
    ``$FAULTLINE_SPARK_DRIVER_JAVA_OPTIONS``."""
    opts = []
    if archive_dump_to:
        opts.append(f"-XX:ArchiveClassesAtExit={archive_dump_to}")
    else:
        f = archive_file()
        if f.is_file():
            opts.append(f"-XX:SharedArchiveFile={f}")
    opts.append(DRIVER_JIT)
    extra = os.environ.get(OPTIONS_ENV, "").strip()
    if extra:
        opts.append(extra)
    return " ".join(opts)


def session_running() -> bool:
    """Whether this process already has a running Spark context.

    Why: ``getOrCreate`` hands every caller in one process the same session, so a caller that
    stops "its" session ends everyone's (a notebook's, the test suite's shared one). A caller
    asks this before :func:`make_session` and stops the session only when it started it."""
    return SparkContext._active_spark_context is not None


def _options(master: str | None, app_name: str, shuffle_partitions: int | None, driver_memory: str) -> dict[str, str]:
    parts = shuffle_partitions or int(os.environ.get("FAULTLINE_SHUFFLE_PARTITIONS", "4"))
    opts = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(parts),
        "spark.default.parallelism": str(parts),
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": driver_memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.autoBroadcastJoinThreshold": str(32 * 1024 * 1024),
        # a session that checks many runs (benchmarks, the test suite) must not keep the plans
        # of every past query: the status store holds them even with the UI off
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "50",
        "spark.ui.retainedStages": "50",
    }
    java = driver_java_options()
    if java:
        opts["spark.driver.extraJavaOptions"] = java
    if master:
        opts["spark.master"] = master
    if master and master.startswith("spark://"):
        # a small standalone worker: ask for what one 2-core worker can give
        opts.update({"spark.executor.memory": os.environ.get("FAULTLINE_EXECUTOR_MEMORY", "1g"),
                     "spark.cores.max": os.environ.get("FAULTLINE_CORES_MAX", "2")})
    return opts


def resolve_master(master: str | None) -> str | None:
    """The master to ask for: the argument, else FAULTLINE_SPARK_MASTER, else local[2] - or
    none under spark-submit, which chose it."""
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    return master or os.environ.get("FAULTLINE_SPARK_MASTER") or (None if under_submit else DEFAULT_MASTER)


def make_session(master: str | None = None, app_name: str = "faultline-checker",
                 shuffle_partitions: int | None = None,
                 driver_memory: str = "2g", log: Path | None = None) -> SparkSession:
    """Build (or reuse) a SparkSession configured for a 2-core box unless told otherwise.

    ``log``: where the JVM writes its output when this call starts the JVM (pyspark's
    ``launch_gateway`` ``popen_kwargs``), instead of this process's stderr: a session started
    in the background must not write into a live progress display, nor borrow file descriptor
    2 from it for the while. One JVM serves a process for good (a stopped context's gateway is
    reused), so a later call's ``log`` does not move it."""
    return start_session(master, app_name, shuffle_partitions, driver_memory, log)[0]


def start_session(master: str | None = None, app_name: str = "faultline-checker",
                  shuffle_partitions: int | None = None, driver_memory: str = "2g",
                  log: Path | None = None) -> tuple[SparkSession, bool]:
    """:func:`make_session`, and whether this call started the session (so it owns it)."""
    master = resolve_master(master)
    if (master or "").startswith("local"):
        # Spark starts its Python workers as PYSPARK_PYTHON, else `python3` from PATH: from a
        # virtual environment used without activation (cron: .venv/bin/faultline) that is the
        # system's python3, without numpy or pyarrow. On this machine ours has them; a cluster's
        # workers bring their own.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    opts = _options(master, app_name, shuffle_partitions, driver_memory)
    with _LOCK:
        started = not session_running()
        if started and log is not None and SparkContext._gateway is None:
            from pyspark.java_gateway import launch_gateway

            conf = SparkConf(loadDefaults=False).setAll(list(opts.items()))
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as fh:   # the child keeps its own descriptor
                gateway = launch_gateway(conf, popen_kwargs={"stdout": fh, "stderr": fh})
            SparkContext(conf=conf, gateway=gateway)
        builder = SparkSession.builder
        for k, v in opts.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if started and not spark.sparkContext.master.startswith("local"):
            ship_code(spark)
    return spark, started


def code_zip() -> str:
    """A zip of what the executors import: ``checkers/`` and ``workloads/history.py`` (the
    checker's floor imports nothing else of this repository; tests/test_import_rules.py)."""
    global _shipped
    with _LOCK:
        if _shipped is None or not os.path.exists(_shipped):
            fd, path = tempfile.mkstemp(prefix="faultline-checker-", suffix=".zip")
            os.close(fd)
            atexit.register(lambda: os.path.exists(path) and os.unlink(path))
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
                for p in sorted((_REPO / "checkers").rglob("*.py")):
                    z.write(p, p.relative_to(_REPO).as_posix())
                for name in ("__init__.py", "history.py"):
                    z.write(_REPO / "workloads" / name, f"workloads/{name}")
            _shipped = path
        return _shipped


def ship_code(spark: SparkSession) -> None:
    """Give a cluster's executors the checker's code (``SparkContext.addPyFile``): the driver's
    checkout is the one that runs, whatever the workers have installed."""
    spark.sparkContext.addPyFile(code_zip())


class SessionWarmup:
    """A session started in a background thread, its Python workers kept warm until taken.

    Never raises: a session that cannot start is ``error`` (one line), and the check starts
    one as it always did. :meth:`close` stops the session only if this warm-up started it.
    ``nice``: the CPU niceness of the JVM and its Python workers, when this warm-up starts the
    JVM (they inherit it from the starting thread): beside a run, the run's processes come first.
    """

    def __init__(self, master: str | None = None, app_name: str = "faultline-checker", log: Path | None = None,
                 keep_warm: float = KEEP_WARM_S, nice: int = 0):
        self.master, self.app_name, self.log, self.keep_warm, self.nice = master, app_name, log, keep_warm, nice
        self.spark: SparkSession | None = None
        self.owned = False
        self.error = ""
        self.ready_s: float | None = None
        self._taken = threading.Event()
        self._closed = False
        self._mu = threading.Lock()   # this warm-up's state; never held while Spark starts
        self._thread = threading.Thread(target=self._run, name="faultline-spark-warmup", daemon=True)

    def start(self) -> "SessionWarmup":
        import time
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        import time

        from checkers.ingest import nice_this_thread

        nice_this_thread(self.nice)     # the JVM and its Python workers are forked from this thread
        try:
            spark, started = start_session(self.master, app_name=self.app_name, log=self.log)
        except Exception as e:  # noqa: BLE001 - the check after the run starts one as before
            self.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            return
        with self._mu:
            self.spark, self.owned = spark, started
            self.ready_s = time.monotonic() - self._t0
            if self._closed:            # closed while it started: its owner is gone
                self._stop()
                return
        self._keep_warm(spark)

    def _keep_warm(self, spark: SparkSession) -> None:
        from checkers.kernel import warm_workers

        while not self._taken.is_set():
            warm_workers(spark).join()
            self._taken.wait(self.keep_warm)

    def resume(self) -> None:
        """Keep the workers warm again until the next :meth:`take` (a suite, between checks)."""
        with self._mu:
            if self.spark is None or self._closed or self._thread.is_alive():
                return
            self._taken.clear()
            self._thread = threading.Thread(target=self._keep_warm, args=(self.spark,), name="faultline-spark-keepwarm",
                                            daemon=True)
            self._thread.start()

    def take(self, timeout: float | None = None) -> SparkSession | None:
        """The session, waiting for it to start; None when it could not (see ``error``). A
        JVM this warm-up started niced gets the caller's priority back for the check (where
        permitted: lowering a niceness needs CAP_SYS_NICE; without it, it stays niced) - at
        once, so one still starting does not starve while the check waits for it."""
        self._taken.set()
        if self.nice:          # still starting, it must not starve now that the check waits for it
            self._restore_priority()
        self._thread.join(timeout)
        if self._thread.is_alive() and self.spark is None:
            self.error = self.error or f"Spark did not start within {timeout:g}s"
        if self.nice:
            self._restore_priority()
        return self.spark

    def _restore_priority(self) -> None:
        """This process's niceness for the warm-up thread and every process this process
        started (the JVM it launched, its Python daemon and workers; by the check the run's
        clients and cluster are gone)."""
        base = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            if self._thread.native_id is not None:
                os.setpriority(os.PRIO_PROCESS, self._thread.native_id, base)
        except OSError:
            pass
        for task in Path("/proc/self/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                renice_tree(child, base)

    def close(self) -> None:
        """Stop the session if this warm-up started it (and still starting: once it has)."""
        self._taken.set()
        with self._mu:
            self._closed = True
            self._stop()

    def _stop(self) -> None:
        spark, self.spark = self.spark, None
        if spark is not None and self.owned:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - stopping is tidiness; the JVM exits with this process
                pass



def renice_tree(pid: int, nice: int) -> None:
    """Set the niceness of every thread of ``pid`` and of its descendants (the JVM, its Python
    daemon and workers); a thread it may not change is left as it is."""
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
            except (OSError, ValueError):
                pass
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                pass
