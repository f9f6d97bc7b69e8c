"""The README's main job: bring up a local cluster and show what runs on it.

Later steps add the scheduler and a demo workload; for now it proves the control plane:
it starts the cluster, reports each process, the nodes and their capacity, and (unless
--keep) stops everything again."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from scheduler.cluster.errors import ClusterError
from scheduler.cluster.local import LocalCluster
from scheduler.cluster.nodes import NodeGroup


def _say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def run_demo(args: argparse.Namespace) -> int:
    cluster = LocalCluster(Path(args.dir))
    if cluster.state is not None and any(cluster.running().values()):
        _say(f"stopping the demo cluster left running in {cluster.dir}")
        cluster.down()
    cluster.purge()
    t0 = time.monotonic()
    mix = [
        NodeGroup(count=max(args.nodes - args.nodes // 4, 1), name_prefix="general"),
        NodeGroup(count=args.nodes // 4, name_prefix="big", cpu="16", memory="64Gi"),
    ]
    try:
        cluster.up([g for g in mix if g.count], progress=_say)
    except ClusterError as exc:
        print(f"kube-async-scheduler: error: {exc}")
        return 1
    try:
        st = cluster.status()
        print()
        print(f"local cluster {st['api_url']} ({st['version']}) up in {time.monotonic() - t0:.1f}s")
        print(f"{'component':<26}{'pid':>8}  state")
        for name, c in st["components"].items():
            print(f"{name:<26}{c['pid']:>8}  {'running' if c['running'] else 'stopped'}")
        nodes = cluster.admin().request("GET", "/api/v1/nodes")[1]["items"]
        print(f"\n{'node':<14}{'cpu':>5}{'memory':>8}{'pods':>6}  zone")
        for n in nodes:
            a = n["status"]["allocatable"]
            zone = n["metadata"]["labels"].get("topology.kubernetes.io/zone", "")
            print(f"{n['metadata']['name']:<14}{a['cpu']:>5}{a['memory']:>8}{a['pods']:>6}  {zone}")
        print(f"\nkubeconfig: {cluster.kubeconfig}")
    finally:
        if not args.keep:
            _say("stopping the cluster (use --keep to leave it running)")
            cluster.down()
    return 0
