"""Where our scheduler's time goes: run it under pyinstrument on the local cluster.

    python -m bench.profile [--nodes 500] [--pods 3000] [--out docs/benchmarks/profile.txt]

Starts a fresh local cluster with plain 4-CPU nodes, runs `kube-async-scheduler run` as a
process under pyinstrument's sampling profiler, creates plain pods as fast as the API
server takes them, waits until all are bound, stops the scheduler with SIGTERM (so the
profile is written) and keeps the text report. The report shows the whole process:
scheduling cycles, informer decoding, binding and event writes, the event loop's idle time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup

SCHED = "profile-scheduler"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--out", default="docs/benchmarks/profile.txt")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kas-profile-"))
    cluster = LocalCluster(work / "cluster")
    print(f"==> cluster with {args.nodes} nodes", flush=True)
    cluster.up([NodeGroup(count=args.nodes, name_prefix="n", cpu="4", memory="32Gi")])
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 5000, "burst": 5000},
        "profiles": [{"schedulerName": SCHED}],
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    argv_s = [
        sys.executable, "-m", "pyinstrument", "-r", "text", "-o", str(out),
        "-m", "scheduler", "run", "--config", str(work / "config.yaml"),
        "--kubeconfig", str(cluster.kubeconfig),
        "--bind-address", "127.0.0.1", "--secure-port", "0",
    ]  # fmt: skip
    log = (work / "scheduler.log").open("wb")
    proc = subprocess.Popen(argv_s, stdout=log, stderr=subprocess.STDOUT)
    admin = cluster.admin(timeout=30)
    admin.request("POST", "/api/v1/namespaces", {"metadata": {"name": "prof"}})
    time.sleep(5)  # caches sync; this time is idle in the profile and says so

    def pod(i: int) -> None:
        requests = {"cpu": "100m", "memory": "500Mi"}
        container = {"name": "c", "image": "x", "resources": {"requests": requests}}
        spec = {"schedulerName": SCHED, "containers": [container]}
        body = {"metadata": {"name": f"p-{i}"}, "spec": spec}
        admin.request("POST", "/api/v1/namespaces/prof/pods", body)

    print(f"==> creating {args.pods} pods", flush=True)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(pod, range(args.pods)))
    while True:
        items = admin.request("GET", "/api/v1/namespaces/prof/pods")[1]["items"]
        bound = sum(1 for p in items if p["spec"].get("nodeName"))
        print(f"    bound {bound}/{args.pods}", flush=True)
        if bound == args.pods or time.monotonic() - t0 > 600:
            break
        time.sleep(1)
    took = time.monotonic() - t0
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    cluster.down()
    print(f"==> {bound} pods bound in {took:.1f}s; profile written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
