"""Command line: `kube-async-scheduler <command>`.

Flags follow kube-scheduler's where they overlap (--config, --kubeconfig, --leader-elect,
-v). Every expected failure ends with a one-line message on stderr and a non-zero exit
code, never a traceback: 2 for bad input (config, flags, node mix), 1 for a runtime
failure (a binary missing, a port taken, the cluster not starting)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from scheduler import __version__

EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2
DEFAULT_CLUSTER_DIR = ".cluster"


def _fail(message: str, code: int) -> int:
    print(f"kube-async-scheduler: error: {message}", file=sys.stderr)
    return code


def _cluster_up(args: argparse.Namespace) -> int:
    from scheduler.cluster.errors import ClusterError
    from scheduler.cluster.local import LocalCluster
    from scheduler.cluster.nodes import default_mix, load_node_mix

    try:
        groups = load_node_mix(Path(args.node_mix)) if args.node_mix else default_mix(args.nodes)
    except ClusterError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
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
        )
    except ClusterError as exc:
        return _fail(str(exc), EXIT_RUNTIME)
    st = cluster.status()
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(
        f"api server: {st['api_url']} ({st.get('version')}), nodes Ready: {st.get('nodes_ready')}"
    )
    print(f"try:        kubectl --kubeconfig {cluster.kubeconfig} get nodes")
    return 0


def _cluster_status(args: argparse.Namespace) -> int:
    from scheduler.cluster.errors import ClusterError
    from scheduler.cluster.local import LocalCluster

    try:
        st = LocalCluster(args.dir).status()
    except ClusterError as exc:
        return _fail(str(exc), EXIT_RUNTIME)
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


def _cluster_down(args: argparse.Namespace) -> int:
    from scheduler.cluster.errors import ClusterError
    from scheduler.cluster.local import LocalCluster

    try:
        cluster = LocalCluster(args.dir)
        stopped = cluster.purge() if args.purge else cluster.down()
    except ClusterError as exc:
        return _fail(str(exc), EXIT_RUNTIME)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


def _check_config(path: str) -> int | None:
    """Validate --config before the runtime is imported (the API client, numpy,
    prometheus: about a second): a bad file ends in exit 2 with one line naming the field,
    long before anything starts. None when the file is valid."""
    from scheduler.config import ConfigError, load_config

    try:
        load_config(path)
    except ConfigError as exc:
        print(f"kube-async-scheduler: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a loader bug: still one line, still "bad input", no traceback
        from scheduler.config.errors import one_line

        detail = one_line(f"{type(exc).__name__}: {exc}", 300)
        print(
            f"kube-async-scheduler: invalid configuration: {path}: cannot be read ({detail})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return None


def _run(args: argparse.Namespace) -> int:
    if args.config:
        failed = _check_config(args.config)
        if failed is not None:
            return failed
    from scheduler.app import run_scheduler

    return run_scheduler(args)


def _demo(args: argparse.Namespace) -> int:
    from scheduler.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-async-scheduler",
        description="A Kubernetes secondary scheduler with asynchronous preemption.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the scheduler (the main job)")
    run.add_argument(
        "--config", help="KubeSchedulerConfiguration YAML file (default: built-in defaults)"
    )
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    run.add_argument(
        "--bind-address", default="0.0.0.0", help="address of /metrics and the health endpoints"
    )
    run.add_argument(
        "--port", type=int, default=10251, help="port of /metrics and the health endpoints (0: any)"
    )
    le = run.add_mutually_exclusive_group()
    le.add_argument(
        "--leader-elect",
        dest="leader_elect",
        action="store_true",
        default=None,
        help="elect a leader through a Lease (overrides leaderElection.leaderElect)",
    )
    le.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    run.add_argument(
        "--preemption-policies",
        action="store_true",
        help="reconcile PreemptionPolicy objects (scheduling.kas.io; the CRD must be installed)",
    )
    run.add_argument(
        "--write-config-to", help="write the effective configuration to this file and exit"
    )
    run.add_argument("-v", "--v", dest="verbosity", type=int, default=2, help="log verbosity 0-5")
    run.set_defaults(func=_run)

    demo = sub.add_parser(
        "demo", help="bring up a local cluster, run the scheduler and a demo workload"
    )
    demo.add_argument("--dir", default=".cluster-demo", help="cluster directory")
    demo.add_argument(
        "--nodes", type=int, default=10, help="kwok nodes (a fifth of them tainted gpu nodes)"
    )
    demo.add_argument("--pods", type=int, default=300, help="pods in the mixed-constraints phase")
    demo.add_argument(
        "--preemptors", type=int, default=4, help="high-priority pods in the preemption phase"
    )
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.add_argument("-v", "--v", dest="verbosity", type=int, default=1)
    demo.set_defaults(func=_demo)

    from scheduler.explain_cli import add_parser as add_explain

    add_explain(sub)

    cl = sub.add_parser(
        "cluster", help="a local control plane: etcd, kube-apiserver, controller manager, kwok"
    )
    csub = cl.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a local cluster and create kwok nodes")
    up.add_argument("--dir", default=DEFAULT_CLUSTER_DIR, help="where the cluster keeps its files")
    up.add_argument(
        "--nodes", type=int, default=3, help="number of default kwok nodes (4 CPU, 16Gi, 110 pods)"
    )
    up.add_argument("--node-mix", help="YAML file describing node groups (overrides --nodes)")
    up.add_argument(
        "--apiserver-port", type=int, help="fixed port for kube-apiserver (default: a free one)"
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real node (containerd + kubelet, root only) and upstream "
        "kube-scheduler as the default scheduler: the local equivalent of kind",
    )
    up.add_argument(
        "--real-nodes", type=int, default=0, help="number of real nodes (implies --real-node)"
    )
    up.set_defaults(func=_cluster_up)
    status = csub.add_parser("status", help="show the cluster's processes")
    status.add_argument("--dir", default=DEFAULT_CLUSTER_DIR)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_cluster_status)
    down = csub.add_parser("down", help="stop the cluster's processes")
    down.add_argument("--dir", default=DEFAULT_CLUSTER_DIR)
    down.add_argument("--purge", action="store_true", help="also remove the cluster's files")
    down.set_defaults(func=_cluster_down)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG
        if getattr(args, "verbosity", 2) >= 4
        else logging.INFO
        if getattr(args, "verbosity", 2) >= 1
        else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "nodes", 0) is not None and getattr(args, "nodes", 0) < 0:
        return _fail("--nodes must be >= 0", EXIT_BAD_INPUT)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
