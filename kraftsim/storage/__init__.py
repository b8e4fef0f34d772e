"""kraftsim storage: Kafka's on-disk log format, flushing and recovery (see docs/kraftsim-storage.md)."""

from .checkpoints import CheckpointError
from .log import OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset
from .manager import LogManager, StorageConfigError
from .records import BatchHeader, CorruptRecordError, Record, UnsupportedCompression

__all__ = [
    "BatchHeader", "CheckpointError", "CorruptRecordError", "LogManager", "OffsetOutOfRange",
    "PartitionLog", "Record", "StorageConfigError", "UnexpectedAppendOffset", "UnsupportedCompression",
]
