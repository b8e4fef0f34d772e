"""Conformance suite: each test pins one rule kraftsim shares with Apache Kafka.

Every test's docstring states Kafka's behaviour and where it lives in Kafka's source; the
cases (inputs and expected outcomes) are ported from Kafka's own unit tests where they exist.
The cluster fixtures (``kraftsim_cluster``) come from ``tests/kraftsim/conftest.py``.
"""
