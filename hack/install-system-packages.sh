#!/usr/bin/env bash
# Install the Debian packages the real-node cluster and the image build need:
#   containerd + runc    the node's container runtime (the project's own containerd instance
#                        runs with its own root, state and socket in the cluster directory;
#                        the package's systemd service is neither started nor needed)
#   containernetworking-plugins  the CNI loopback plugin (the only network a real node has)
#   buildah              builds the image from the unchanged Dockerfile without a daemon
#   debootstrap          makes the Debian base image the Dockerfile's FROM is given
# Only what is missing is installed, so a second run takes a second. Needs root (CI is).
#   bash hack/install-system-packages.sh
set -euo pipefail
log() { printf '[install-system-packages] %s\n' "$*" >&2; }
want=(containerd runc containernetworking-plugins buildah debootstrap)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then log "all present: ${want[*]}"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { log "need root to install ${missing[*]}"; exit 1; }
s=$SECONDS
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: buildah recommends a pile (podman bits, fuse-overlayfs, slirp)
# that vfs storage and chroot isolation do not use
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# the package starts its own containerd under systemd where there is one; the project's
# containerd is private to each cluster, so the machine-wide one must not be left running
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now containerd.service >/dev/null 2>&1 || true
fi
log "installed in $((SECONDS - s))s"
