#!/usr/bin/env bash
# Build the scheduler image from the UNCHANGED Dockerfile without Docker, and (optionally)
# import it into a local real-node cluster's containerd.
#
#   bash hack/build-image.sh                      build, write the archive, print its path
#   bash hack/build-image.sh --import .cluster    ... and import it into that cluster's real nodes
#
# How, without a Docker engine or a registry:
# - the Dockerfile's FROM is the build argument PYTHON_IMAGE (python:3.11-slim with Docker);
#   here it is a base made from Debian's own packages: debootstrap bookworm (its python3
#   is 3.11, as in python:3.11-slim) with python3, python3-venv, python3-pip and
#   python-is-python3 (the Dockerfile runs `python -m venv`), committed with buildah;
# - buildah builds with vfs storage and chroot isolation (no overlay, no user namespaces,
#   no daemon), its storage kept in the cache folder, apart from the machine's;
# - pip inside the build trusts what the machine's pip trusts: the CA bundle named by the
#   machine's pip configuration (and its index-url, if one is set) is bind-mounted for the
#   RUN steps only, with a pip.conf pointing at it; mounts are never committed, and the
#   script checks that neither file is in the final image.
# The base and the image are cached: the base by suite and package list, the image is
# rebuilt every time (a minute or two; the base takes 2-4 minutes once per machine).
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE="${KAS_BASE_SUITE:-bookworm}"
MIRROR="${KAS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_PACKAGES="python3,python3-venv,python3-pip,python-is-python3"
VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/kube-async-scheduler/Chart.yaml)
IMAGE="kube-async-scheduler:${VERSION}"
CACHE_ROOT="${KAS_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-async-scheduler}"
IMAGES="$CACHE_ROOT/images"
BUILDAH=(buildah --root "$CACHE_ROOT/buildah/root" --runroot "$CACHE_ROOT/buildah/run" --storage-driver vfs)
import_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --import) import_dir="$2"; shift 2 ;;
    *) echo "usage: $0 [--import CLUSTER_DIR]" >&2; exit 2 ;;
  esac
done

log() { printf '[build-image] %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "needs root (debootstrap, buildah chroot isolation)"; exit 1; }
command -v buildah >/dev/null && command -v debootstrap >/dev/null || bash hack/install-system-packages.sh
mkdir -p "$IMAGES"
T0=$SECONDS

# ---- the base ------------------------------------------------------------------------
base_key=$(printf '%s %s' "$SUITE" "$BASE_PACKAGES" | sha256sum | cut -c1-12)
BASE="kas.local/debian-python:${SUITE}-${base_key}"
base_tar="$IMAGES/debian-$SUITE-$base_key.rootfs.tar"
if ! "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  if [ ! -f "$base_tar" ]; then
    s=$SECONDS
    log "debootstrap $SUITE with $BASE_PACKAGES (once per machine)"
    root=$(mktemp -d "$IMAGES/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$root" "$MIRROR" \
      > "$IMAGES/debootstrap.log" 2>&1 || { tail -20 "$IMAGES/debootstrap.log" >&2; exit 1; }
    # what an image does not need: package lists, caches, logs
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* "$root"/tmp/*
    tar -C "$root" --numeric-owner -cf "$base_tar.tmp" .
    mv "$base_tar.tmp" "$base_tar"
    rm -rf "$root"; trap - EXIT
    log "  base root filesystem in $((SECONDS - s))s"
  fi
  s=$SECONDS
  ctr=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" add "$ctr" "$base_tar" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE" >/dev/null
  log "  base image $BASE committed in $((SECONDS - s))s"
else
  log "base image $BASE: cached"
fi

# ---- pip's trust, for the RUN steps only -----------------------------------------------
pip_cfg() { python3 -m pip config get "global.$1" 2>/dev/null || true; }
cert="${PIP_CERT:-$(pip_cfg cert)}"
index="${PIP_INDEX_URL:-$(pip_cfg index-url)}"
build_etc=$(mktemp -d)
trap 'rm -rf "$build_etc"' EXIT
mounts=()
{
  echo "[global]"
  if [ -n "$cert" ] && [ -f "$cert" ]; then
    cp "$cert" "$build_etc/ca.crt"
    echo "cert = /run/kas-build-ca.crt"
    mounts+=(-v "$build_etc/ca.crt:/run/kas-build-ca.crt:ro")
  fi
  [ -n "$index" ] && echo "index-url = $index"
} > "$build_etc/pip.conf"
mounts+=(-v "$build_etc/pip.conf:/etc/pip.conf:ro")

# ---- the image -------------------------------------------------------------------------
s=$SECONDS
log "buildah bud $IMAGE (Dockerfile unchanged, PYTHON_IMAGE=$BASE)"
"${BUILDAH[@]}" bud --isolation chroot --layers=false --pull-never \
  --build-arg "PYTHON_IMAGE=$BASE" "${mounts[@]}" \
  -t "$IMAGE" -f Dockerfile . > "$IMAGES/build.log" 2>&1 \
  || { tail -30 "$IMAGES/build.log" >&2; exit 1; }
log "  built in $((SECONDS - s))s"

# the trust given to the build must not be in the image
check=$("${BUILDAH[@]}" from --pull-never "$IMAGE")
mnt=$("${BUILDAH[@]}" mount "$check")
leaked=""
for f in /etc/pip.conf /run/kas-build-ca.crt; do [ -s "$mnt$f" ] && leaked="$leaked $f"; done
[ -x "$mnt/opt/venv/bin/kube-async-scheduler" ] || leaked="$leaked (no /opt/venv/bin/kube-async-scheduler!)"
"${BUILDAH[@]}" umount "$check" >/dev/null; "${BUILDAH[@]}" rm "$check" >/dev/null
[ -z "$leaked" ] || { log "the final image is wrong:$leaked"; exit 1; }

archive="$IMAGES/kube-async-scheduler-$VERSION.docker.tar"
rm -f "$archive"
"${BUILDAH[@]}" push --quiet "$IMAGE" "docker-archive:$archive:docker.io/library/$IMAGE" >/dev/null
log "image $IMAGE: $archive ($(du -h "$archive" | cut -f1)), $((SECONDS - T0))s in all"

if [ -n "$import_dir" ]; then
  PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
  PYTHONPATH="$PWD" "$PY" -m scheduler.cluster.realnode import-image --dir "$import_dir" "$archive" >&2
fi
echo "$archive"
