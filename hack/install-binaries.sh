#!/usr/bin/env bash
# Build (or reuse) the control-plane binaries the project needs, pinned by version.
#
# Everything comes from the Go module proxy: there is no Docker engine and no other
# download source on these machines. Results are cached outside the checkout, keyed by
# version, so a second run on the same machine takes seconds.
#
#   hack/install-binaries.sh            build what is missing, print the bin directory
#   hack/install-binaries.sh realnode   also the real-node extras: kubelet, prometheus, promtool
#                                       (only the end-to-end tests and hack/kind-local.sh need them)
#   KAS_BIN_CACHE=/some/dir hack/...    use another cache root
#
# Why a wrapper module for Kubernetes: k8s.io/kubernetes replaces its ~30 staging modules
# (k8s.io/api, client-go, ...) with ./staging paths, so `go install k8s.io/kubernetes/...`
# is refused. A throwaway module that requires k8s.io/kubernetes and replaces every staging
# module with the published v0.Y.Z of the same module builds cleanly. The list of staging
# modules is read from kubernetes' own go.mod, so it never goes stale.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
# Prometheus publishes its Go module as v0.3MM.P for release 3.MM.P
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"

CACHE_ROOT="${KAS_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-async-scheduler}"
BIN_DIR="$CACHE_ROOT/bin"
mkdir -p "$BIN_DIR"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

log() { printf '[install-binaries] %s\n' "$*" >&2; }
elapsed() { local s=$1; printf '%dm%02ds' $(( ($(date +%s) - s) / 60 )) $(( ($(date +%s) - s) % 60 )); }

# have NAME VERSION: the versioned binary is already in the cache
have() { [ -x "$BIN_DIR/$1-$2" ]; }
link() { ln -sf "$1-$2" "$BIN_DIR/$1"; }

build_kubernetes() {
  local names=(kube-apiserver kube-controller-manager kube-scheduler kubectl "$@") missing=()
  for n in "${names[@]}"; do have "$n" "$KUBE_VERSION" || missing+=("$n"); done
  if [ ${#missing[@]} -eq 0 ]; then
    log "kubernetes $KUBE_VERSION: cached"; for n in "${names[@]}"; do link "$n" "$KUBE_VERSION"; done; return
  fi
  local t0; t0=$(date +%s)
  local work="$CACHE_ROOT/src/kubernetes-$KUBE_VERSION"
  mkdir -p "$work"
  log "kubernetes $KUBE_VERSION: building ${missing[*]} (a cold build takes 10-25 minutes on 2 cores)"
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local patch="${KUBE_VERSION##*.}"
  local staging_version="v0.${minor}.${patch}"
  (
    cd "$work"
    [ -f go.mod ] || go mod init kas.local/kubernetes-build >/dev/null 2>&1
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    # every "k8s.io/x => ./staging/src/k8s.io/x" line becomes "k8s.io/x => k8s.io/x v0.Y.Z"
    local replaces
    replaces=$(grep -E '=> \./staging/' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}')
    [ -n "$replaces" ] || { log "no staging replaces found in $gomod"; exit 1; }
    {
      echo "module kas.local/kubernetes-build"
      echo
      echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')"
      echo
      echo "replace ("
      echo "$replaces"
      echo ")"
    } > go.mod
    go get "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null 2>&1 || go get "k8s.io/kubernetes@$KUBE_VERSION"
    for n in "${missing[@]}"; do go get "k8s.io/kubernetes/cmd/$n@$KUBE_VERSION" 2>/dev/null || true; done
    local pkg="k8s.io/component-base/version" ld
    ld="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    # client-go keeps its own copy of the version variables (kubectl version --client reads it)
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    for n in "${missing[@]}"; do
      local s; s=$(date +%s)
      log "  go build $n"
      go build -trimpath -ldflags "$ld" -o "$BIN_DIR/$n-$KUBE_VERSION.tmp" "k8s.io/kubernetes/cmd/$n"
      mv "$BIN_DIR/$n-$KUBE_VERSION.tmp" "$BIN_DIR/$n-$KUBE_VERSION"
      log "  $n built in $(elapsed "$s")"
    done
  )
  for n in "${names[@]}"; do link "$n" "$KUBE_VERSION"; done
  log "kubernetes $KUBE_VERSION: done in $(elapsed "$t0")"
}

build_etcd() {
  if have etcd "$ETCD_VERSION"; then log "etcd $ETCD_VERSION: cached"; link etcd "$ETCD_VERSION"; return; fi
  local t0; t0=$(date +%s)
  local work="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  mkdir -p "$work"
  log "etcd $ETCD_VERSION: building"
  (
    cd "$work"
    [ -f go.mod ] || go mod init kas.local/etcd-build >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd-$ETCD_VERSION.tmp" go.etcd.io/etcd/server/v3
    mv "$BIN_DIR/etcd-$ETCD_VERSION.tmp" "$BIN_DIR/etcd-$ETCD_VERSION"
  )
  link etcd "$ETCD_VERSION"
  log "etcd $ETCD_VERSION: done in $(elapsed "$t0")"
}

build_kwok() {
  if have kwok "$KWOK_VERSION" && [ -d "$CACHE_ROOT/kwok-stages-$KWOK_VERSION" ]; then
    log "kwok $KWOK_VERSION: cached"; link kwok "$KWOK_VERSION"; return
  fi
  local t0; t0=$(date +%s)
  log "kwok $KWOK_VERSION: building"
  local gobin="$CACHE_ROOT/src/kwok-$KWOK_VERSION-bin"
  mkdir -p "$gobin"
  GOBIN="$gobin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$gobin/kwok" "$BIN_DIR/kwok-$KWOK_VERSION"
  # kwok >= 0.8 refuses to start without stage definitions; they ship in the module source
  local src; src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION
  rm -rf "$CACHE_ROOT/kwok-stages-$KWOK_VERSION.tmp"
  mkdir -p "$CACHE_ROOT/kwok-stages-$KWOK_VERSION.tmp"
  cp -r "$src/kustomize/stage/." "$CACHE_ROOT/kwok-stages-$KWOK_VERSION.tmp/"
  chmod -R u+w "$CACHE_ROOT/kwok-stages-$KWOK_VERSION.tmp"
  mv "$CACHE_ROOT/kwok-stages-$KWOK_VERSION.tmp" "$CACHE_ROOT/kwok-stages-$KWOK_VERSION"
  ln -sfn "kwok-stages-$KWOK_VERSION" "$CACHE_ROOT/kwok-stages"
  link kwok "$KWOK_VERSION"
  log "kwok $KWOK_VERSION: done in $(elapsed "$t0")"
}

build_helm() {
  if have helm "$HELM_VERSION"; then log "helm $HELM_VERSION: cached"; link helm "$HELM_VERSION"; return; fi
  local t0; t0=$(date +%s)
  log "helm $HELM_VERSION: building"
  local gobin="$CACHE_ROOT/src/helm-$HELM_VERSION-bin"
  mkdir -p "$gobin"
  GOBIN="$gobin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  mv "$gobin/helm" "$BIN_DIR/helm-$HELM_VERSION"
  link helm "$HELM_VERSION"
  log "helm $HELM_VERSION: done in $(elapsed "$t0")"
}

build_prometheus() {
  if have prometheus "$PROMETHEUS_VERSION" && have promtool "$PROMETHEUS_VERSION"; then
    log "prometheus $PROMETHEUS_VERSION: cached"; link prometheus "$PROMETHEUS_VERSION"; link promtool "$PROMETHEUS_VERSION"; return
  fi
  local t0; t0=$(date +%s)
  local work="$CACHE_ROOT/src/prometheus-$PROMETHEUS_VERSION"
  mkdir -p "$work"
  log "prometheus $PROMETHEUS_VERSION: building prometheus and promtool"
  (
    cd "$work"
    [ -f go.mod ] || go mod init kas.local/prometheus-build >/dev/null 2>&1
    # naming the two commands makes go get record the checksums of everything they import
    go get "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION" \
      "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
    # without the builtinassets tag the web UI is not embedded; the HTTP API (all we use)
    # is. remove_all_sd leaves out every service-discovery plugin (cloud SDKs, client-go:
    # most of the compile time); static_configs, all the project scrapes with, stay.
    local pkg="github.com/prometheus/common/version" ld
    ld="-s -w -X $pkg.Version=${PROMETHEUS_VERSION#v} -X $pkg.Branch=module -X $pkg.Revision=$PROMETHEUS_VERSION"
    for n in prometheus promtool; do
      local s; s=$(date +%s)
      log "  go build $n"
      go build -trimpath -tags remove_all_sd -ldflags "$ld" -o "$BIN_DIR/$n-$PROMETHEUS_VERSION.tmp" \
        "github.com/prometheus/prometheus/cmd/$n"
      mv "$BIN_DIR/$n-$PROMETHEUS_VERSION.tmp" "$BIN_DIR/$n-$PROMETHEUS_VERSION"
      log "  $n built in $(elapsed "$s")"
    done
  )
  link prometheus "$PROMETHEUS_VERSION"; link promtool "$PROMETHEUS_VERSION"
  log "prometheus $PROMETHEUS_VERSION: done in $(elapsed "$t0")"
}

T0=$(date +%s)
only="${1:-all}"
case "$only" in
  all) build_etcd; build_kwok; build_helm; build_kubernetes ;;
  # the real-node extras: kubelet (same wrapper module, so it reuses the control plane's
  # compiled packages) and Prometheus with promtool
  realnode) build_etcd; build_kwok; build_helm; build_kubernetes kubelet; build_prometheus ;;
  kubelet) build_kubernetes kubelet ;;
  prometheus) build_prometheus ;;
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  helm) build_helm ;;
  *) log "unknown component '$only' (all, realnode, kubernetes, kubelet, prometheus, etcd, kwok, helm)"; exit 2 ;;
esac
log "binaries ready in $BIN_DIR ($(elapsed "$T0"))"
echo "$BIN_DIR"
