#!/usr/bin/env bash
# The kind path without Docker, in one command: a local cluster with a real node
# (containerd + kubelet) and kwok nodes, the image built from the Dockerfile, the Helm
# chart installed, a pod scheduled by the scheduler running inside its Pod, and its
# metrics in a real Prometheus. Needs root (containerd, cgroups, mounts); everything is
# installed by the project's own scripts, so a fresh machine works.
#
#   bash hack/kind-local.sh            bring it all up and leave it running
#   bash hack/kind-local.sh --down     ... then tear it down again (the machine as before)
#   kube-async-scheduler cluster down --dir .cluster-kind    tear down later
#
# Everything listens on 127.0.0.1: the API server, the kubelet, the scheduler's HTTPS
# port (/metrics, probes; host networking: there is no pod network), Prometheus, which
# scrapes over TLS with its own ServiceAccount's token as on a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${KAS_KIND_DIR:-.cluster-kind}"
NS=kube-async-scheduler
RELEASE=kube-async-scheduler
PORT="${KAS_SCHEDULER_PORT:-10259}"
down=false; [ "${1:-}" = "--down" ] && down=true
step() { printf '\n=== %s\n' "$*"; }

step "python environment, Debian packages, binaries (each cached after the first run)"
bash hack/setup-venv.sh
bash hack/install-system-packages.sh
BIN=$(bash hack/install-binaries.sh realnode | tail -n 1)
export KAS_BIN_DIR="$BIN" PATH="$BIN:$PATH"
KAS=(.venv/bin/kube-async-scheduler)
PY=.venv/bin/python

step "cluster: control plane, upstream kube-scheduler, a real node, 3 kwok nodes"
"${KAS[@]}" cluster up --dir "$DIR" --nodes 3 --real-node
export KUBECONFIG="$PWD/$DIR/kubeconfig"
$down && trap '"${KAS[@]}" cluster down --dir "$DIR" --purge' EXIT
kubectl get nodes -o wide

step "image from the unchanged Dockerfile (buildah), imported into the node's containerd"
bash hack/build-image.sh --import "$DIR"

step "helm install, with the values for a cluster without a pod network"
API_PORT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"]["kube-apiserver"])' "$DIR/cluster.json")
VALUES=(--set hostNetwork=true --set probeHost=127.0.0.1
        --set apiServer.host=127.0.0.1 --set apiServer.port="$API_PORT"
        --set server.bindAddress=127.0.0.1 --set server.securePort="$PORT"
        # the APIService would point at a ClusterIP, which nothing routes without kube-proxy
        --set explainAPI.enabled=false
        --set-string 'nodeSelector.kas\.local/real-node=true'
        --set image.pullPolicy=Never)
helm install "$RELEASE" charts/kube-async-scheduler -n "$NS" --create-namespace "${VALUES[@]}"
kubectl -n "$NS" rollout status deployment/"$RELEASE" --timeout=300s
kubectl -n "$NS" get pods -o wide

step "a pod naming the scheduler, bound by it from inside its Pod"
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n demo apply -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  schedulerName: kube-async-scheduler
  # kwok nodes only: the real node runs the scheduler itself
  nodeSelector: {kubernetes.io/hostname: kwok-node-0}
  containers: [{name: c, image: kas.local/pause:1, resources: {requests: {cpu: 100m}}}]
YAML
kubectl -n demo wait --for=condition=PodScheduled pod/hello --timeout=120s
kubectl -n demo get events --field-selector involvedObject.name=hello,reason=Scheduled \
  -o custom-columns=REASON:.reason,FROM:.reportingComponent,MESSAGE:.message
echo "--- the scheduler's log, from its Pod:"
kubectl -n "$NS" logs deployment/"$RELEASE" --tail=5

step "Prometheus scraping the scheduler as the chart's ServiceMonitor says"
# Prometheus' own ServiceAccount, allowed `get` on /metrics by the chart's ClusterRole
kubectl -n "$NS" create serviceaccount prometheus --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create clusterrolebinding prometheus-kas-metrics --clusterrole="$RELEASE-metrics-reader" \
  --serviceaccount="$NS:prometheus" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
TOKEN="$DIR/prometheus-token"
kubectl -n "$NS" create token prometheus --duration=24h > "$TOKEN"
SM=$(mktemp)
helm template "$RELEASE" charts/kube-async-scheduler -n "$NS" "${VALUES[@]}" \
  --set serviceMonitor.enabled=true --set serviceMonitor.interval=5s --set serviceMonitor.scrapeTimeout=5s \
  --show-only templates/servicemonitor.yaml > "$SM"
PYTHONPATH=$PWD "$PY" -m kas_dev.cluster.prometheus start --dir "$DIR" \
  --service-monitor "$SM" --service "$RELEASE-metrics" --target "127.0.0.1:$PORT" \
  --token-file "$TOKEN"
rm -f "$SM"
for _ in $(seq 60); do
  out=$(PYTHONPATH=$PWD "$PY" -m kas_dev.cluster.prometheus query --dir "$DIR" \
    'sum by (job, result) (scheduler_schedule_attempts_total)')
  grep -q '"scheduled"' <<<"$out" && break
  sleep 2
done
echo "$out"
grep -q '"scheduled"' <<<"$out" || { echo "no scheduler series in Prometheus" >&2; exit 1; }

step "done"
echo "kubeconfig: export KUBECONFIG=$PWD/$DIR/kubeconfig"
$down || echo "tear down:  ${KAS[*]} cluster down --dir $DIR --purge"
