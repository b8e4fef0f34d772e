"""Targets: what a campaign runs against, started by faultline (targets/base.py says why)."""
