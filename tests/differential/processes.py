"""The two contenders as real processes on one cluster: upstream kube-scheduler v1.37.2 and
this scheduler, each with a profile (schedulerName) and an identity of its own, and a reader
of the per-node final scores each one logs.

Upstream logs "Calculated node's final score for pod" at verbosity 10 in schedule_one.go
(prioritizeNodes); `--vmodule=schedule_one=10` turns on exactly that file. This scheduler
logs `final score pod=... node=... score=...` at DEBUG from algorithm/schedule_one.py.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.logged_process import LoggedProcess
from tests.scheduler_process import SchedulerProcess

UPSTREAM = "oracle-upstream"
OURS = "oracle-ours"

_UPSTREAM_FINAL = re.compile(
    r"\"Calculated node's final score for pod\" pod=\"([^\"]+)\" node=\"([^\"]+)\" score=(-?\d+)"
)
_UPSTREAM_PLUGIN = re.compile(
    r"\"Plugin scored node for pod\" pod=\"([^\"]+)\" plugin=\"([^\"]+)\" node=\"([^\"]+)\" "
    r"score=(-?\d+)"
)
# upstream logs each victim as the reprieve keeps it out, at V(5) in default_preemption.go
# (SelectVictimsOnNode): one line per victim per candidate node
_UPSTREAM_VICTIM = re.compile(
    r"\"Pods are potential preemption victims on node\" pod=\"([^\"]+)\" pods=\[([^\]]*)\] "
    r"node=\"([^\"]+)\""
)
_OURS_CANDIDATE = re.compile(
    r"preemption candidate pod=(\S+) node=(\S+) victims=(\S*) pdb_violations=(\d+)"
)
_UPSTREAM_VICTIM_REF = re.compile(r"\{\"name\":\"([^\"]+)\",\"namespace\":\"([^\"]+)\"\}")
# the end of a pod's first dry run: later candidate lines belong to a retry (after the
# refused DELETEs, on a state the DisruptionTarget patches changed)
_UPSTREAM_PICKED = re.compile(
    r"\"the target node for the preemption is determined\" pod=\"([^\"]+)\""
)
_OURS_PICKED = re.compile(r"preemption decided preemptor=(\S+) ")
_OURS_FINAL = re.compile(r"final score pod=(\S+) node=(\S+) score=(-?\d+)")
_OURS_PLUGIN = re.compile(r"plugin score pod=(\S+) plugin=(\S+) node=(\S+) score=(-?\d+)")
_OURS_SEARCHED = re.compile(r"searched nodes pod=(\S+) start=(\d+) processed=(\d+)")


def _config(
    name: str, kubeconfig: Path, ours: bool, sampling: bool = False, backoff: int = 0
) -> dict[str, Any]:
    """Both schedulers' configuration. `sampling` (tests/differential/sampling.py): the
    default percentageOfNodesToScore (0, adaptive) and upstream's node search with one
    worker, the one outcome of its parallel search that goroutine timing cannot change
    (schedule_one.go findNodesThatPassFilters; this scheduler searches serially); a long
    backoff, so a refused bind is not retried (a retry would move the search's start)
    before the harness deletes the pod. `backoff` (seconds, when not 0): the same for
    every run (the gang oracle: a member whose bind was refused is not retried, nor are
    its siblings, before the gang's outcome is read)."""
    profile: dict[str, Any] = {"schedulerName": name}
    if not sampling:
        profile["percentageOfNodesToScore"] = 100
    if ours:
        # upstream considers every pod a possible victim; so must we, to compare
        profile["pluginConfig"] = [
            {
                "name": "DefaultPreemption",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "DefaultPreemptionArgs",
                    "victimScope": "All",
                },
            }
        ]
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "profiles": [profile],
    }
    if sampling:
        cfg.update(parallelism=1, podInitialBackoffSeconds=20, podMaxBackoffSeconds=20)
    if backoff:
        cfg.update(podInitialBackoffSeconds=backoff, podMaxBackoffSeconds=backoff)
    return cfg


@dataclass
class ScoreLog:
    """Final (and per-plugin) scores per pod, read incrementally from a log file."""

    path: Path
    ours: bool
    final: dict[str, dict[str, int]] = field(default_factory=dict)
    plugins: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    processed: dict[str, int] = field(default_factory=dict)  # ours only: nodes searched
    # pod -> candidate node -> its victims (first dry run only), and ours' PDB violations
    candidates: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    violations: dict[str, dict[str, int]] = field(default_factory=dict)
    _picked: set[str] = field(default_factory=set)
    _offset: int = 0

    def refresh(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        final_re = _OURS_FINAL if self.ours else _UPSTREAM_FINAL
        plugin_re = _OURS_PLUGIN if self.ours else _UPSTREAM_PLUGIN
        for line in chunk[: end + 1].decode(errors="replace").splitlines():
            if self._candidate(line):
                continue
            m = final_re.search(line)
            if m:
                # the first attempt's score stands: a retry after a refused bind is ignored
                self.final.setdefault(m.group(1), {}).setdefault(m.group(2), int(m.group(3)))
                continue
            if self.ours:
                m = _OURS_SEARCHED.search(line)
                if m:
                    self.processed.setdefault(m.group(1), int(m.group(3)))
                    continue
            m = plugin_re.search(line)
            if m:
                by_node = self.plugins.setdefault(m.group(1), {}).setdefault(m.group(3), {})
                by_node.setdefault(m.group(2), int(m.group(4)))

    def _candidate(self, line: str) -> bool:
        """A preemption candidate's victims, from a pod's first dry run only."""
        picked = (_OURS_PICKED if self.ours else _UPSTREAM_PICKED).search(line)
        if picked is not None:
            self._picked.add(picked.group(1))
            return True
        if self.ours:
            m = _OURS_CANDIDATE.search(line)
            if m is None:
                return False
            pod, node = m.group(1), m.group(2)
            if pod not in self._picked:
                self.candidates.setdefault(pod, {})[node] = [v for v in m.group(3).split(",") if v]
                self.violations.setdefault(pod, {})[node] = int(m.group(4))
            return True
        m = _UPSTREAM_VICTIM.search(line)
        if m is None:
            return False
        pod, node = m.group(1), m.group(3)
        if pod not in self._picked:
            victims = [f"{ns}/{name}" for name, ns in _UPSTREAM_VICTIM_REF.findall(m.group(2))]
            self.candidates.setdefault(pod, {}).setdefault(node, []).extend(victims)
        return True

    def candidates_of(self, pod_key: str) -> dict[str, list[str]]:
        self.refresh()
        return {n: list(v) for n, v in self.candidates.get(pod_key, {}).items()}

    def violations_of(self, pod_key: str) -> dict[str, int]:
        self.refresh()
        return dict(self.violations.get(pod_key, {}))

    def scores_of(self, pod_key: str) -> dict[str, int]:
        self.refresh()
        return dict(self.final.get(pod_key, {}))

    def processed_of(self, pod_key: str) -> int | None:
        self.refresh()
        return self.processed.get(pod_key)

    def plugin_scores_of(self, pod_key: str) -> dict[str, dict[str, int]]:
        self.refresh()
        return {n: dict(s) for n, s in self.plugins.get(pod_key, {}).items()}


class Upstream(LoggedProcess):
    def __init__(
        self,
        bin_dir: Path,
        kubeconfig: Path,
        workdir: Path,
        sampling: bool = False,
        gates: list[str] | None = None,
        backoff: int = 0,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = workdir / "upstream-config.yaml"
        cfg.write_text(yaml.safe_dump(_config(UPSTREAM, kubeconfig, False, sampling, backoff)))
        log_path = workdir / "upstream.log"
        argv = [
            str(bin_dir / "kube-scheduler"),
            f"--config={cfg}",
            "--secure-port=0",
            "-v=2",
            # schedule_one: the scores; default_preemption: each candidate's victims
            "--vmodule=schedule_one=10,default_preemption=5",
            *(gates or []),
        ]
        super().__init__(argv, log_path)
        self.scores = ScoreLog(self.log_path, ours=False)


class Ours:
    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        sampling: bool = False,
        gates: list[str] | None = None,
        backoff: int = 0,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = workdir / "ours-config.yaml"
        cfg.write_text(yaml.safe_dump(_config(OURS, kubeconfig, True, sampling, backoff)))
        self.log_path = workdir / "ours.log"
        self.process = SchedulerProcess(
            str(kubeconfig), cfg, self.log_path, extra_args=["-v", "4", *(gates or [])]
        )
        self.scores = ScoreLog(self.log_path, ours=True)

    def start(self) -> None:
        self.process.start(wait_ready=True)

    def alive(self) -> bool:
        p = self.process.proc
        return p is not None and p.poll() is None

    def stop(self) -> None:
        self.process.stop()


def python() -> str:
    return sys.executable
