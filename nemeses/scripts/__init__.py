"""Stdlib-only scripts shipped to target hosts and run there with ``python3 -``."""
from pathlib import Path


def script_text(name: str) -> str:
    """The source of a script in this folder, to pass as ``input=`` to ``transport.run``."""
    return (Path(__file__).parent / name).read_text()
