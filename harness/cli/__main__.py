"""``python -m harness.cli``: the ``faultline`` command (the console script's entry point)."""
from harness.cli import main

main()
