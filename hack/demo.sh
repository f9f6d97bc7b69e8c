#!/usr/bin/env bash
# The main job on a local real cluster, from a fresh machine: set up the venv and the
# control-plane binaries, then run the demo.   bash hack/demo.sh [demo flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==> python environment"; bash hack/setup-venv.sh
echo "==> control-plane binaries (the first build takes 10-20 minutes)"
KAS_BIN_DIR=$(bash hack/install-binaries.sh | tail -n 1)
export KAS_BIN_DIR
exec .venv/bin/kube-async-scheduler demo "$@"
