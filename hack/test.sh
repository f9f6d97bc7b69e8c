#!/usr/bin/env bash
# The test command: set up everything on a fresh machine (venv, control-plane binaries),
# then run lint, type checks and the whole test suite against a real local control plane.
#   bash hack/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== %s\n' "$*"; }
t() { local s=$SECONDS; "$@"; printf '    (%ds)\n' $((SECONDS - s)); }

step "python environment (.venv, editable install with the dev extra)"
t bash hack/setup-venv.sh
step "Debian packages of the end-to-end tests (containerd, runc, CNI plugins, buildah, debootstrap)"
# root only (CI is root); without them tests/e2e skip outside CI and fail in it
if [ "$(id -u)" -eq 0 ]; then t bash hack/install-system-packages.sh; else echo "    (not root: skipped)"; fi
step "binaries: control plane, plus kubelet, prometheus, promtool (cached by version)"
s=$SECONDS
# the script's last stdout line is the bin folder; its progress goes to stderr.
# `realnode` adds what tests/e2e need; the image they run is built by the tests'
# fixture (hack/build-image.sh, cached by source content)
BIN_DIR=$(bash hack/install-binaries.sh realnode | tail -n 1)
printf '    (%ds)\n' $((SECONDS - s))
export KAS_BIN_DIR="$BIN_DIR"
step "ruff"
t .venv/bin/ruff check scheduler kas_dev tests bench
step "mypy (strict: the scheduler package and kas_dev)"
t .venv/bin/mypy
step "pytest"
set +e
.venv/bin/pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
# exit code 5 means no test was collected: that is a failure of the suite, say so
if [ $rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi
exit $rc
