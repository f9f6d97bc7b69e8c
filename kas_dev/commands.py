"""`kube-async-scheduler cluster up|status|down`: the local control plane from the command
line. scheduler/cli.py defines the flags (so `--help` works everywhere) and imports this
module only when one of these commands runs, from a checkout of the repository."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import default_mix, load_node_mix
from scheduler.cli import EXIT_BAD_INPUT, EXIT_RUNTIME, fail


def cluster_up(args: argparse.Namespace) -> int:
    try:
        groups = load_node_mix(Path(args.node_mix)) if args.node_mix else default_mix(args.nodes)
    except ClusterError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    # `cluster up` returns and leaves the cluster running: its processes must not be tied
    # to this short-lived one (the test suite sets this for clusters it starts itself)
    os.environ.pop("KAS_CLUSTER_DIE_WITH_PARENT", None)
    try:
        cluster = LocalCluster(args.dir)
        cluster.up(
            groups,
            apiserver_port=args.apiserver_port,
            progress=lambda m: print(f"==> {m}", flush=True),
            real_nodes=args.real_nodes or (1 if args.real_node else 0),
            generic_workload=args.generic_workload,
            large=args.large,
        )
    except ClusterError as exc:
        return fail(str(exc), EXIT_RUNTIME)
    st = cluster.status()
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(
        f"api server: {st['api_url']} ({st.get('version')}), nodes Ready: {st.get('nodes_ready')}"
    )
    if st.get("large"):
        print("mode:       large (request timeout 5m, GOMEMLIMIT=13GiB on kube-apiserver)")
    if st.get("feature_gates"):
        print(f"gates:      {', '.join(st['feature_gates'])}")
    print(f"try:        kubectl --kubeconfig {cluster.kubeconfig} get nodes")
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    try:
        st = LocalCluster(args.dir).status()
    except ClusterError as exc:
        return fail(str(exc), EXIT_RUNTIME)
    if args.json:
        print(json.dumps(st, indent=2))
        return 0 if st["running"] else 3
    if "components" not in st:
        print(f"no cluster in {st['dir']}")
        return 3
    print(f"cluster in {st['dir']}: {'running' if st['running'] else 'NOT running'}")
    print(f"  api server  {st['api_url']}  {st.get('version', '')}")
    print(f"  kubeconfig  {st['kubeconfig']}")
    for name, c in st["components"].items():
        print(f"  {name:<24} pid {c['pid'] or '-':>8}  {'running' if c['running'] else 'stopped'}")
    if "nodes_ready" in st:
        print(f"  nodes Ready {st['nodes_ready']}")
    return 0 if st["running"] else 3


def cluster_down(args: argparse.Namespace) -> int:
    try:
        cluster = LocalCluster(args.dir)
        stopped = cluster.purge() if args.purge else cluster.down()
    except ClusterError as exc:
        return fail(str(exc), EXIT_RUNTIME)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0
