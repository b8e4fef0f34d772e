#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (run as root):
# system packages, the project with its test extras, and a running Docker engine.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
pkgs="chromium docker.io openssh-server iptables iproute2 debootstrap procps psmisc sudo"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
python3 -m pip install -q -e '.[test]'
# a Docker engine for the container tests; started once, left running for the session
if ! docker info >/dev/null 2>&1; then
  (dockerd >/tmp/faultline-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start (see /tmp/faultline-dockerd.log)"; exit 1; }
fi
echo "setup: test host ready"
