#!/usr/bin/env bash
# The README's first command: a first run on a stock Debian 12 / Ubuntu 24.04.
#
# Why a virtual environment: those systems mark their Python "externally managed" (PEP 668),
# so `pip install` outside a venv is refused. This script makes `.venv` beside the checkout
# with the system's /usr/bin/python3, installs faultline's runtime dependencies only (no test
# extra), and runs the default campaign. What it needs from the system: python3 >= 3.11 with
# its venv module (Debian/Ubuntu package python3-venv) and a Java runtime for the checker
# (PySpark starts a JVM). As root it installs them with apt-get; as a normal user it prints
# the one command to run and stops.
#
# Usage: bash scripts/quickstart.sh [CAMPAIGN] [faultline run options...]
#        (default campaign: campaigns/kill-restart.yaml). Afterwards: . .venv/bin/activate
#        With `--target apache-kafka:VERSION` the campaign runs on real Apache Kafka of that release
#        (as root: each node gets a network namespace); Maven is installed if missing, and the
#        release is resolved from Maven Central into ~/.cache/faultline/kafka on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3 || true)"
if [ -z "$py" ]; then
  echo "faultline needs python3 (>= 3.11): apt-get install -y python3 python3-venv default-jre-headless" >&2
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "faultline needs python3 >= 3.11; $py is $("$py" -c 'import platform; print(platform.python_version())')" >&2
  exit 1
fi

missing=()
# real Apache Kafka (--target apache-kafka...) comes from Maven Central: Maven resolves the release
# and every node's disk is a lossyfs mount (FUSE: fusermount3 from fuse3)
case " $* " in *" --target apache-kafka"*|*" --target=apache-kafka"*)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3) ;;
esac
if [ ! -x .venv/bin/python ]; then
  # Debian splits ensurepip into python3-venv (python3.X-venv); without it `-m venv` fails
  "$py" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
fi
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} with apt-get ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "faultline needs: sudo apt-get install -y ${missing[*]}  (then run this command again)" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "creating .venv with $py ..." >&2
  "$py" -m venv .venv
fi
echo "installing faultline and its runtime dependencies into .venv (pip install -e .) ..." >&2
.venv/bin/python -m pip install -q -e .

# use the venv as `. .venv/bin/activate` would: Spark starts its Python workers as `python3`
# from PATH, and the system's python3 has none of the checker's libraries (numpy, pyarrow)
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
# once per installation (about a minute): every later verdict's Spark starts in half the CPU
.venv/bin/python -m checkers.jvm_archive --if-missing >/dev/null || echo "(the checker starts Spark without it)" >&2
campaign="${1:-campaigns/kill-restart.yaml}"
[ $# -gt 0 ] && shift
exec faultline run "$campaign" "$@"
