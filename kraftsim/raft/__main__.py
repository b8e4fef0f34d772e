"""``python -m kraftsim.raft --config FILE``: one raft node alone (see kraftsim/raft/node.py)."""
import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # kio's optional strategies: ~0.4 s

from kraftsim.raft.node import main  # noqa: E402

sys.exit(main())
