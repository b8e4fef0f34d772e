"""Spark checkers: decide from the recorded history alone whether acknowledged writes were lost.

The package imports only pyspark (with the pyarrow, pandas and numpy its Arrow support brings)
and :mod:`workloads.history`, so that ``spark-submit`` can ship it to workers that do not have
the harness installed (docs/architecture.md, "Floors"). Entry point: :func:`checkers.job.check_run` and
``python -m checkers RUN_DIR``.
"""
