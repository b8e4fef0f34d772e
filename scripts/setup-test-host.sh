#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 / Ubuntu 24.04 machine (run as root):
# system packages (Maven and a JRE for real Apache Kafka among them), the project with its test
# extras in the virtual environment .venv, the Apache Kafka releases the tests run
# (tests/kafka-releases.txt, from Maven Central into the release cache), and a running Docker
# engine. Then `. .venv/bin/activate && python3 -m pytest ...` (README).
#
# Why .venv: those systems mark their Python "externally managed" (PEP 668) and refuse
# `pip install` outside a venv; the same .venv as scripts/quickstart.sh. Activated (PATH, not
# only its python) because PySpark starts its Python workers as `python3` from PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
pkgs="chromium docker.io openssh-server iptables iproute2 debootstrap procps psmisc sudo fuse3 strace"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"
# Debian splits ensurepip into python3-venv; the checker's PySpark needs a Java runtime
"$py" -c 'import ensurepip, venv' 2>/dev/null || missing="$missing python3-venv"
command -v java >/dev/null 2>&1 || missing="$missing default-jre-headless"
# the real-Kafka tests resolve Apache Kafka releases from Maven Central
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
if [ -n "$missing" ]; then
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q -e '.[test]'
# the Apache Kafka releases the real-Kafka tests run, into the release cache (cached after the first time)
.venv/bin/faultline kafka install $(grep -v '^#' tests/kafka-releases.txt) >/dev/null
# Spark's classes archived once for the checker's driver JVM (checkers/jvm_archive.py): every
# run's check then starts in about half the CPU
.venv/bin/python -m checkers.jvm_archive --if-missing >/dev/null || echo "setup: no Spark class archive (checks start Spark without it)"
# a Docker engine for the container tests; started once, left running for the session
if ! docker info >/dev/null 2>&1; then
  (dockerd >/tmp/faultline-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start (see /tmp/faultline-dockerd.log)"; exit 1; }
fi
echo "setup: test host ready"
