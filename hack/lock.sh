#!/usr/bin/env bash
# Regenerate the lock files from pyproject.toml: every package pinned, every file's hash.
#
#   bash hack/lock.sh            rewrite the three locks (re-run after changing a dependency)
#   bash hack/lock.sh --check    fail when a lock no longer matches pyproject.toml
#   bash hack/lock.sh --upgrade  move every pin to the newest release the floors admit
#
#   requirements.lock        [project] dependencies: the image's runtime set
#   requirements-dev.lock    ... plus the dev extra: hack/setup-venv.sh (CI, README's tests)
#   requirements-build.lock  the image builder's tools (dependency group image-build)
#
# Installs use them with `pip install --require-hashes -r <lock>`, then the project itself
# with --no-deps: a package or a file that is not in the lock, or a file whose hash
# differs, fails the install instead of being fetched.
#
# The resolver is uv (`uv pip compile --universal`): one resolution valid for every
# platform and every Python >= 3.11, markers kept (uvloop's `sys_platform != 'win32'`),
# and every file of each pinned release hashed, so the same lock serves the image
# (CPython 3.11), CI and a developer's machine. pip-compile resolves for the interpreter
# it runs on only. Without --upgrade, versions already in a lock are kept when they still
# satisfy pyproject.toml (uv reads the existing output file as its preferences).
# uv is the venv's when installed there, else the one on PATH, else the pinned version
# below installed into a cache folder of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_PIN="uv==0.13.9"
mode=write
extra_args=()
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --upgrade) extra_args+=(--upgrade) ;;
  *) echo "usage: $0 [--check|--upgrade]" >&2; exit 2 ;;
esac

find_uv() {
  if [ -x .venv/bin/uv ]; then echo .venv/bin/uv; return; fi
  if command -v uv >/dev/null 2>&1; then command -v uv; return; fi
  local home="${XDG_CACHE_HOME:-$HOME/.cache}/kube-async-scheduler/uv-venv"
  if [ ! -x "$home/bin/uv" ]; then
    echo "[lock] installing $UV_PIN into $home" >&2
    python3 -m venv "$home"
    "$home/bin/python" -m pip install -q --disable-pip-version-check "$UV_PIN"
  fi
  echo "$home/bin/uv"
}
UV=$(find_uv)

# the lock must not depend on where it was made: no index URL, no local paths
compile() {  # compile OUTPUT [uv args...]
  local out="$1"; shift
  "$UV" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --no-emit-index-url --custom-compile-command "bash hack/lock.sh" \
    "${extra_args[@]}" "$@" -o "$out"
}

locks=(requirements.lock requirements-dev.lock requirements-build.lock)
args_for() {
  case "$1" in
    requirements.lock) echo "pyproject.toml" ;;
    requirements-dev.lock) echo "pyproject.toml --extra dev" ;;
    requirements-build.lock) echo "--group image-build" ;;
  esac
}

if [ "$mode" = check ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  rc=0
  for lock in "${locks[@]}"; do
    cp "$lock" "$tmp/$lock" 2>/dev/null || : > "$tmp/$lock"
    # shellcheck disable=SC2046
    compile "$tmp/$lock" $(args_for "$lock")
    if ! diff -u "$lock" "$tmp/$lock" >&2; then
      echo "[lock] $lock does not match pyproject.toml: run bash hack/lock.sh" >&2
      rc=1
    fi
  done
  exit $rc
fi

for lock in "${locks[@]}"; do
  # shellcheck disable=SC2046
  compile "$lock" $(args_for "$lock")
  echo "[lock] $lock: $(grep -c '^[A-Za-z0-9].*==' "$lock") packages" >&2
done
