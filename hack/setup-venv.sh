#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install the project with its dev extra. Idempotent.
#
# Dependencies come from requirements-dev.lock only, by hash (--require-hashes): a
# package or file not in the lock, or one whose hash differs, fails the install. The
# project itself is then installed editable with --no-deps (nothing more is fetched) and
# without build isolation (the lock's setuptools builds it; an isolated build would fetch
# an unhashed setuptools). After changing a dependency in pyproject.toml run
# `bash hack/lock.sh`, then this script again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip -q --disable-pip-version-check)
"${pip[@]}" install --require-hashes --only-binary=:all: -r requirements-dev.lock
"${pip[@]}" install --no-deps --no-build-isolation -e .
