"""Docker targets: the kraftsim image (:mod:`harness.docker.image`, built without a registry)
and an inventory's containers, network and volumes (:mod:`harness.docker.cluster`).
The command line is :mod:`harness.cli.docker` (``faultline docker ...``, docs/targets.md).
"""
