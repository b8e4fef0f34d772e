"""kraftsim: the embedded KRaft cluster faultline runs as a separate program (docs/kraftsim.md)."""

__version__ = "0.1"
