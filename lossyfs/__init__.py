"""lossyfs: a passthrough FUSE filesystem that forgets, on command, exactly what was not fsynced.

Why our own (docs/nemeses.md, "reboot: lossyfs"): a power loss keeps only what the program made
durable with fsync / fdatasync (file data and size) and with an fsync of a directory (the names in
it). Kafka acknowledges ``acks=all`` writes from the page cache, so what a crash keeps decides
what it loses. These machines have no SysRq; Jepsen's LazyFS keeps unsynced writes in its own
cache and drops them on command, but lets creates, renames and unlinks reach the disk at once and
makes writes durable once its cache is full. lossyfs is exact:

- every write goes straight through to a backing directory (reads and appends cost no memory);
- per file it keeps the durable size and the pre-images of the bytes overwritten or truncated
  away since the file's last fsync (``lossyfs/durability.py``);
- per directory the names it durably held before its first change since its last fsync, and the
  files and directories unlinked or replaced since are kept aside until then;
- ``crash`` (over the control socket) puts the backing directory in exactly the durable state,
  then the daemon drops the mount and mounts it again, so the kernel's caches go as in a reboot.

faultline starts it as a program (``python -m lossyfs ...``, ``lossyfs/__main__.py``) and never
imports it: it stands apart like ``kraftsim/``, on the standard library and mfusepy alone.
"""

__version__ = "0.1.0"
