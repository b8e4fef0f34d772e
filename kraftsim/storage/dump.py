"""``python -m kraftsim.storage.dump FILE.log [--records]`` — print a segment's batches, like
Kafka's ``kafka-dump-log.sh``, and say where (and why) the valid data ends.

Why: after a fault, the first question is what is actually on disk; this answers it for kraftsim
and for real Kafka segments alike, without starting a broker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .records import COMPRESSION_CODEC_MASK, UnsupportedCompression, decode_records, iter_batches, validate_batch


def dump(path: Path, show_records: bool, out=sys.stdout) -> int:
    try:
        buf = path.read_bytes()
    except OSError as e:
        print(f"{path}: cannot read: {e.strerror}", file=sys.stderr)
        return 2
    end = 0
    valid = 0
    for h in iter_batches(buf):
        row = {"position": h.position, "base_offset": h.base_offset, "last_offset": h.last_offset,
               "size": h.length, "leader_epoch": h.partition_leader_epoch, "producer_id": h.producer_id,
               "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
               "count": h.record_count, "compression": h.attributes & COMPRESSION_CODEC_MASK,
               "crc_valid": h.crc_valid}
        print(json.dumps(row), file=out)
        end = h.position + h.length
        if not h.crc_valid:
            break
        valid = end
        if show_records:
            try:
                for r in decode_records(memoryview(buf)[h.position:end]):
                    print(json.dumps({"offset": r.offset, "timestamp": r.timestamp,
                                      "key": None if r.key is None else r.key.decode("utf-8", "replace"),
                                      "value": None if r.value is None else r.value.decode("utf-8", "replace"),
                                      "headers": [[k, None if v is None else v.decode("utf-8", "replace")]
                                                  for k, v in r.headers]}), file=out)
            except UnsupportedCompression as e:
                print(json.dumps({"records": str(e)}), file=out)
    if valid < len(buf):
        why = validate_batch(memoryview(buf)[valid:]) or "invalid batch"
        print(json.dumps({"valid_bytes": valid, "file_bytes": len(buf), "stops_because": why}), file=out)
    else:
        print(json.dumps({"valid_bytes": valid, "file_bytes": len(buf)}), file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kraftsim.storage.dump", description=__doc__.splitlines()[0])
    ap.add_argument("segment", type=Path)
    ap.add_argument("--records", action="store_true", help="also print every record")
    a = ap.parse_args(argv)
    return dump(a.segment, a.records)


if __name__ == "__main__":
    sys.exit(main())
