"""Both schedulers on one cluster under the same assertions: this scheduler's process, or
upstream kube-scheduler v1.37.2 with the same profile. A module's fixture parametrized
over CONTENDERS starts one of them with `contender_on_cluster`; what the tests then check
is upstream's behaviour, not only this scheduler's. `start_upstream` runs kube-scheduler
on a cluster already up, beside this scheduler (the DRA churn test)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle
from tests.logged_process import LoggedProcess
from tests.scheduler_process import SchedulerProcess, write_config

CONTENDERS = ["ours", "upstream"]


class UpstreamScheduler(LoggedProcess):
    """Upstream kube-scheduler v1.37.2 with the same configuration file."""

    def __init__(
        self,
        bin_dir: Path,
        kubeconfig: str,
        config: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
    ) -> None:
        raw = yaml.safe_load(config.read_text())
        raw["clientConnection"]["kubeconfig"] = kubeconfig
        config.write_text(yaml.safe_dump(raw))
        argv = [str(bin_dir / "kube-scheduler"), f"--config={config}", "--secure-port=0", "-v=2"]
        super().__init__([*argv, *extra_args], log_path)


Scheduler = SchedulerProcess | UpstreamScheduler


def start_upstream(
    cluster: ClusterHandle, config: Path, log_path: Path, extra_args: Sequence[str] = ()
) -> UpstreamScheduler:
    """Upstream kube-scheduler started on `cluster` with the profiles of `config` (a
    file of its own: the kubeconfig is written into it). Not waited for: it serves no
    health port here (--secure-port=0); pods wait for it as for any scheduler."""
    sched = UpstreamScheduler(cluster.bin_dir, cluster.kubeconfig, config, log_path, extra_args)
    sched.start()
    return sched


def contender_on_cluster(
    which: str,
    folder: Path,
    nodes: NodeGroup,
    profiles: list[dict[str, Any]],
    extra_args: Sequence[str] = (),
) -> Iterator[tuple[ClusterHandle, Scheduler]]:
    """A fresh cluster with `nodes` and `which` contender running `profiles` (with
    `extra_args`, flags both accept); stopped and torn down when the generator closes."""
    from kas_dev.cluster.local import LocalCluster

    local = LocalCluster(folder / "cluster")
    local.up([nodes])
    cluster = ClusterHandle(local)
    config = write_config(folder / "config.yaml", profiles)
    sched: Scheduler
    if which == "ours":
        sched = SchedulerProcess(
            cluster.kubeconfig, config, folder / "scheduler.log", extra_args=list(extra_args)
        ).start()
    else:
        sched = start_upstream(cluster, config, folder / "up.log", extra_args)
    try:
        yield cluster, sched
    finally:
        sched.stop()
        local.down()
