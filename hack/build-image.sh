#!/usr/bin/env bash
# Build the scheduler image from the UNCHANGED Dockerfile without Docker, and (optionally)
# import it into a local real-node cluster's containerd.
#
#   bash hack/build-image.sh                      build, write the archive (and the image's
#                                                 SBOM next to it), print the archive's path
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
# - the Dockerfile's final stage is FROM scratch (the builder assembles the runtime), so
#   both this path and `docker build` make an image with no shell, pip or package manager;
#   this script checks that, and copies the image's SBOM next to the archive.
# Both are cached: the base by suite and package list (2-4 minutes once per machine), the
# image archive by the content of everything the build reads (Dockerfile, pyproject,
# the package source) and the base, so an unchanged tree is not rebuilt.
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
BASE_RECIPE=3   # bump when the image made from the root filesystem changes
BASE="kas.local/debian-python:${SUITE}-${base_key}-r${BASE_RECIPE}"
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
  # an empty /etc/pip.conf and an empty /run/kas-build: the build mounts its pip
  # configuration and CA bundle over them (below). A bind mount on a path the image
  # lacks leaves an empty file or folder behind in the layer; on one the base already
  # has it leaves nothing, so the final image differs from the base only by what the
  # Dockerfile does.
  "${BUILDAH[@]}" run --isolation chroot "$ctr" -- sh -c ': > /etc/pip.conf && mkdir -p /run/kas-build'
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE" >/dev/null
  log "  base image $BASE committed in $((SECONDS - s))s"
else
  log "base image $BASE: cached"
fi

# ---- the image archive, keyed by what the build reads ---------------------------------
src_key=$( { echo "$BASE"; find Dockerfile .dockerignore pyproject.toml README* requirements.lock \
  requirements-build.lock scheduler hack/image -type f \
  ! -path '*/__pycache__/*' ! -name '*.py[cod]' -print0 | sort -z | xargs -0 sha256sum; } \
  | sha256sum | cut -c1-12)
archive="$IMAGES/kube-async-scheduler-$VERSION-$src_key.docker.tar"
# the image's SBOM (CycloneDX JSON, written by the build), kept next to the archive
sbom="${archive%.docker.tar}.sbom.cdx.json"
SBOM_IN_IMAGE=usr/share/doc/kube-async-scheduler/sbom.cdx.json
import_archive() {
  if [ -n "$import_dir" ]; then
    PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
    PYTHONPATH="$PWD" "$PY" -m kas_dev.cluster.realnode import-image --dir "$import_dir" "$archive" >&2
  fi
  echo "$archive"
}
if [ -f "$archive" ] && [ -f "$sbom" ]; then
  log "image $IMAGE: cached ($archive)"
  import_archive
  exit 0
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
    mkdir -p "$build_etc/run"
    cp "$cert" "$build_etc/run/ca.crt"
    echo "cert = /run/kas-build/ca.crt"
    mounts+=(-v "$build_etc/run:/run/kas-build:ro")
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

# the final image is the assembled runtime only: the trust given to the build is not in
# it (the builder stage had /etc/pip.conf and /run/kas-build mounted), nor a shell, pip or
# a package manager; the entry point and the SBOM are
check=$("${BUILDAH[@]}" from --pull-never "$IMAGE")
mnt=$("${BUILDAH[@]}" mount "$check")
leaked=""
for p in etc/pip.conf run/kas-build bin/sh usr/bin/sh bin/bash usr/bin/dash usr/bin/apt \
         usr/bin/apt-get usr/bin/dpkg var/lib/dpkg usr/bin/pip usr/bin/pip3 opt/venv/bin/pip; do
  if [ -e "$mnt/$p" ] || [ -L "$mnt/$p" ]; then leaked="$leaked /$p"; fi
done
[ -x "$mnt/opt/venv/bin/kube-async-scheduler" ] || leaked="$leaked (no /opt/venv/bin/kube-async-scheduler!)"
[ -s "$mnt/$SBOM_IN_IMAGE" ] || leaked="$leaked (no /$SBOM_IN_IMAGE!)"
[ -z "$leaked" ] && cp "$mnt/$SBOM_IN_IMAGE" "$sbom.tmp"
"${BUILDAH[@]}" umount "$check" >/dev/null; "${BUILDAH[@]}" rm "$check" >/dev/null
[ -z "$leaked" ] || { log "the final image is wrong:$leaked"; exit 1; }

# keep one of each: the current archive, the current base, no dangling layers (vfs
# stores every layer as a full copy, so old ones add up fast)
rm -f "$IMAGES"/kube-async-scheduler-*.docker.tar "$IMAGES"/kube-async-scheduler-*.sbom.cdx.json
for old in $("${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}}' | grep '^kas.local/debian-python:' | grep -vx "$BASE"); do
  "${BUILDAH[@]}" rmi "$old" >/dev/null 2>&1 || true
done
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
"${BUILDAH[@]}" push --quiet "$IMAGE" "docker-archive:$archive.tmp:docker.io/library/$IMAGE" >/dev/null
mv "$archive.tmp" "$archive"
mv "$sbom.tmp" "$sbom"
log "image $IMAGE: $archive ($(du -h "$archive" | cut -f1)), $((SECONDS - T0))s in all"
import_archive
