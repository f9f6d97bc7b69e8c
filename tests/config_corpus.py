"""A generated corpus of malformed KubeSchedulerConfiguration files, and its verdicts.

Every case is a file that must be refused: mutations of valid configurations (each leaf
given a value of the wrong type, each object an unknown or mis-cased field, numbers out of
range or out of their Go type, bad and inconsistent durations, bad names, bad plugin args)
and YAML pathologies (unhashable and non-string keys, deep nesting, alias bombs and
recursive aliases, several documents, control characters, non-UTF-8 bytes, binary junk,
tags, huge files, numbers and strings). The generation is deterministic (fixed seeds).

A case passes when loading it is refused with exactly one line that names the field (the
expected path when the case has one, else a field or a line/offset in the file), in under
a second. Through the real process (``python -m scheduler run --config F``) it must also
exit 2.

    python -m tests.config_corpus             # every case in-process, summary table
    python -m tests.config_corpus --cli all   # and every case through the real process
    python -m tests.config_corpus --cli 40    # a spread sample of 40 through the process
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.catalog import config_from_bytes
from scheduler.config import ConfigError
from scheduler.config.names import NOT_IMPLEMENTED

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "kube-async-scheduler: invalid configuration: "
API = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
MAX_SECONDS = 1.0

# ---------------------------------------------------------------- valid bases

MINIMAL: dict[str, Any] = {"apiVersion": API, "kind": KIND}

FULL: dict[str, Any] = {
    "apiVersion": API,
    "kind": KIND,
    "parallelism": 8,
    "percentageOfNodesToScore": 50,
    "podInitialBackoffSeconds": 2,
    "podMaxBackoffSeconds": 20,
    "enableProfiling": False,
    "enableContentionProfiling": False,
    "delayCacheUntilActive": False,
    "leaderElection": {
        "leaderElect": True,
        "leaseDuration": "30s",
        "renewDeadline": "20s",
        "retryPeriod": "4s",
        "resourceLock": "leases",
        "resourceName": "my-scheduler",
        "resourceNamespace": "scheduling",
    },
    "clientConnection": {
        "kubeconfig": "/etc/kubeconfig",
        "qps": 40.5,
        "burst": 80,
        "contentType": "application/json",
        "acceptContentTypes": "application/json",
    },
    "profiles": [
        {
            "schedulerName": "batch",
            "percentageOfNodesToScore": 30,
            "plugins": {
                "score": {
                    "enabled": [{"name": "ImageLocality", "weight": 4}],
                    "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                },
                "filter": {"disabled": [{"name": "NodePorts"}]},
                "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
            },
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "ignoredResources": ["example.com/foo"],
                        "ignoredResourceGroups": ["example.org"],
                        "scoringStrategy": {
                            "type": "RequestedToCapacityRatio",
                            "resources": [{"name": "cpu", "weight": 2}],
                            "requestedToCapacityRatio": {
                                "shape": [
                                    {"utilization": 0, "score": 0},
                                    {"utilization": 100, "score": 10},
                                ]
                            },
                        },
                    },
                },
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu", "weight": 1}]},
                },
                {
                    "name": "InterPodAffinity",
                    "args": {
                        "hardPodAffinityWeight": 5,
                        "ignorePreferredTermsOfExistingPods": True,
                    },
                },
                {
                    "name": "NodeAffinity",
                    "args": {
                        "addedAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["a"]}
                                        ]
                                    }
                                ]
                            },
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 10,
                                    "preference": {
                                        "matchExpressions": [{"key": "disk", "operator": "Exists"}]
                                    },
                                }
                            ],
                        }
                    },
                },
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {
                                "maxSkew": 2,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                            }
                        ],
                    },
                },
                {
                    "name": "VolumeBinding",
                    "args": {
                        "bindTimeoutSeconds": 300,
                        "shape": [
                            {"utilization": 0, "score": 10},
                            {"utilization": 100, "score": 0},
                        ],
                    },
                },
                {
                    "name": "DefaultPreemption",
                    "args": {
                        "minCandidateNodesPercentage": 20,
                        "minCandidateNodesAbsolute": 50,
                        "mode": "Sync",
                        "victimScope": "All",
                    },
                },
            ],
        },
        {"schedulerName": "interactive"},
    ],
}

BASES: dict[str, dict[str, Any]] = {"minimal": MINIMAL, "full": FULL}


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    category: str
    data: bytes
    field: str | None = None  # the path the error must name; None: any field or location


def _dump(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


def _path_text(path: Sequence[str | int]) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out


def _walk(
    node: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, (*path, i))


def _set(doc: Any, path: Sequence[str | int], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return out


def _mutated(base: dict[str, Any], path: str, value: Any) -> bytes:
    return _dump(_set(base, _parse_path(path), value))


def _parse_path(text: str) -> list[str | int]:
    out: list[str | int] = []
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", text):
        out.append(int(part[1:-1]) if part.startswith("[") else part)
    return out


def _with(base: dict[str, Any], **fields: Any) -> bytes:
    return _dump({**copy.deepcopy(base), **fields})


# ---------------------------------------------------------------- generators

_WRONG_BY_TYPE: dict[str, list[Any]] = {
    "bool": ["yes-please", 1, 1.5, ["x"], {"x": 1}],
    "int": ["12", 1.5, True, ["x"], {"x": 1}],
    "float": ["fast", True, ["x"], {"x": 1}],
    "str": [7, 1.5, True, ["x"], {"x": 1}],
    "list": ["x", 7, True, {"x": 1}],
    "dict": ["x", 7, True, ["x"]],
}


def _kind(v: Any) -> str | None:
    for name, t in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if isinstance(v, t):
            return name
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "dict"
    return None


def wrong_types() -> Iterator[Case]:
    for base_name, base in BASES.items():
        for path, value in _walk(base):
            kind = _kind(value)
            if not path or kind is None:
                continue
            where = _path_text(path)
            for wrong in _WRONG_BY_TYPE[kind]:
                if kind == "list" and not value:
                    continue
                yield Case(
                    f"type/{base_name}/{where}={type(wrong).__name__}",
                    "wrong type",
                    _dump(_set(base, path, wrong)),
                    where,
                )


def unknown_fields() -> Iterator[Case]:
    for base_name, base in BASES.items():
        for path, value in _walk(base):
            if not isinstance(value, dict):
                continue
            where = _path_text(path)
            for bogus in ("bogusField", "x-extra"):
                key_path = f"{where}.{bogus}" if where else bogus
                yield Case(
                    f"unknown/{base_name}/{key_path}",
                    "unknown field",
                    _dump(_set(base, (*path, bogus), 1) if path else {**base, bogus: 1}),
                    key_path,
                )
            for key in list(value)[:3]:
                # field names are case-sensitive upstream (sigs.k8s.io/json strict decoding)
                if key in ("name",) or not isinstance(key, str):
                    continue
                wrong_case = key[0].swapcase() + key[1:]
                renamed = {(wrong_case if k == key else k): v for k, v in value.items()}
                key_path = f"{where}.{wrong_case}" if where else wrong_case
                field: str | None = key_path
                if key in ("apiVersion", "kind") and not where:
                    field = None  # the missing apiVersion/kind is reported first
                doc = _set(base, path, renamed) if path else renamed
                yield Case(f"case/{base_name}/{key_path}", "unknown field", _dump(doc), field)


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
PF = "profiles[0].pluginConfig"
RANGES: list[tuple[str, list[Any]]] = [
    ("parallelism", [0, -1, INT32_MAX + 1, -(1 << 31) - 1, 10**21]),
    ("percentageOfNodesToScore", [-1, 101, 1000, INT32_MAX + 1]),
    ("profiles[0].percentageOfNodesToScore", [-1, 101, INT32_MAX + 1]),
    ("podInitialBackoffSeconds", [0, -1, INT64_MAX + 1, 10**30]),
    ("podMaxBackoffSeconds", [1, 0, -5, INT64_MAX + 1]),
    ("clientConnection.burst", [-1, -100, INT32_MAX + 1, 10**21]),
    ("clientConnection.qps", [float("nan"), float("inf"), float("-inf"), 1e39, -1e39, 10**40]),
    ("profiles[0].plugins.score.enabled[0].weight", [-1, INT32_MAX + 1, 10**21, -(1 << 31) - 1]),
    ("profiles[0].plugins.multiPoint.enabled[0].weight", [-1, INT32_MAX + 1, 10**21]),
    ("profiles[0].plugins.score.disabled[0].weight", [INT32_MAX + 1, "heavy"]),
    (f"{PF}[0].args.scoringStrategy.resources[0].weight", [101, -1, INT64_MAX + 1]),
    (f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].utilization", [-1, 101]),
    (f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization", [0, 101]),
    (f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].score", [11, -1, 100]),
    (f"{PF}[1].args.resources[0].weight", [2, -1, 100]),
    (f"{PF}[2].args.hardPodAffinityWeight", [-1, 101, INT32_MAX + 1]),
    (f"{PF}[3].args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
     [-1, INT32_MAX + 1]),
    (f"{PF}[4].args.defaultConstraints[0].maxSkew", [0, -1, INT32_MAX + 1]),
    (f"{PF}[5].args.bindTimeoutSeconds", [-1, INT64_MAX + 1]),
    (f"{PF}[5].args.shape[0].utilization", [-1, 101]),
    (f"{PF}[5].args.shape[1].utilization", [0]),
    (f"{PF}[5].args.shape[0].score", [11, -1]),
    (f"{PF}[6].args.minCandidateNodesPercentage", [-1, 101, INT32_MAX + 1]),
    (f"{PF}[6].args.minCandidateNodesAbsolute", [-1, INT32_MAX + 1]),
]  # fmt: skip


def ranges() -> Iterator[Case]:
    for path, values in RANGES:
        for v in values:
            yield Case(f"range/{path}={v!r}", "out of range", _mutated(FULL, path, v), path)
    both_zero = _set(
        _set(FULL, _parse_path(f"{PF}[6].args.minCandidateNodesPercentage"), 0),
        _parse_path(f"{PF}[6].args.minCandidateNodesAbsolute"),
        0,
    )
    yield Case(
        "range/preemption both zero", "out of range", _dump(both_zero),
        f"{PF}[6].args.minCandidateNodesAbsolute",
    )  # fmt: skip


BAD_DURATIONS = [
    "15", "15 s", " 15s", "15s ", "1x", "1.2.3s", "", "s", "1h1", "P15S", "15S", "1e3s",
    "--1s", "+-1s", "1h 2m", "٣s", "100000000000h", "9" * 400 + "h", "2562048h",
    "0x10s", "1_000s", "inf", "NaN",
]  # fmt: skip


def durations() -> Iterator[Case]:
    for key in ("leaseDuration", "renewDeadline", "retryPeriod"):
        path = f"leaderElection.{key}"
        for text in BAD_DURATIONS:
            yield Case(f"duration/{path}={text[:20]!r}", "bad duration",
                       _mutated(FULL, path, text), path)  # fmt: skip
        for v in (15, 1.5, True, ["15s"], None):
            if v is None:
                continue
            yield Case(f"duration/{path}={v!r}", "bad duration", _mutated(FULL, path, v), path)
        for text in ("-5s", "0s", "-0.5s", "0"):
            yield Case(f"duration/{path}={text}", "bad duration", _mutated(FULL, path, text), path)
    le = "leaderElection"
    inconsistent = [
        # (lease, renew, retry, field)
        ("20s", "20s", "4s", f"{le}.leaseDuration"),
        ("10s", "20s", "4s", f"{le}.leaseDuration"),
        ("1h", "1h0m0.001s", "1s", f"{le}.leaseDuration"),
        ("30s", "4s", "4s", f"{le}.renewDeadline"),
        ("30s", "4.8s", "4s", f"{le}.renewDeadline"),
        ("30s", "20s", "20s", f"{le}.renewDeadline"),
        ("900ms", "500ms", "100ms", f"{le}.leaseDuration"),
        ("999ms", "10ms", "1ms", f"{le}.leaseDuration"),
        ("600000h", "10s", "2s", f"{le}.leaseDuration"),
        ("2562047h", "20s", "4s", f"{le}.leaseDuration"),
        ("596524h", "1h", "1s", f"{le}.leaseDuration"),
    ]
    for lease, renew, retry, field in inconsistent:
        doc = copy.deepcopy(FULL)
        doc[le].update(leaseDuration=lease, renewDeadline=renew, retryPeriod=retry)
        yield Case(f"duration/{lease},{renew},{retry}", "bad duration", _dump(doc), field)


BAD_QUALIFIED = ["Has Space", "-lead", "trail-", "a/b/c", "/x", "x/", "UPPER/x", "a" * 64,
                 "é", "a" * 254 + "/x", "tab\tname", "new\nline", "semi;colon"]  # fmt: skip
BAD_SUBDOMAIN = ["Bad_Name", "UPPER", "-x", "x-", "a" * 254, "a..b", "a b", "ünï"]
BAD_LABEL = ["a.b", "UPPER", "-x", "a" * 64, "a_b", "a b"]


def names() -> Iterator[Case]:
    for n in BAD_QUALIFIED:
        yield Case(f"name/schedulerName={n[:20]!r}", "bad name",
                   _mutated(FULL, "profiles[0].schedulerName", n),
                   "profiles[0].schedulerName")  # fmt: skip
    for n in BAD_SUBDOMAIN:
        yield Case(f"name/resourceName={n[:20]!r}", "bad name",
                   _mutated(FULL, "leaderElection.resourceName", n),
                   "leaderElection.resourceName")  # fmt: skip
    for n in BAD_LABEL:
        yield Case(f"name/resourceNamespace={n[:20]!r}", "bad name",
                   _mutated(FULL, "leaderElection.resourceNamespace", n),
                   "leaderElection.resourceNamespace")  # fmt: skip
    for lock in ("endpoints", "configmaps", "endpointsleases", "Leases"):
        yield Case(f"name/resourceLock={lock}", "bad name",
                   _mutated(FULL, "leaderElection.resourceLock", lock),
                   "leaderElection.resourceLock")  # fmt: skip
    yield Case("name/duplicate profile", "bad name",
               _mutated(FULL, "profiles[1].schedulerName", "batch"),
               "profiles[1].schedulerName")  # fmt: skip
    yield Case("name/nameless second profile", "bad name",
               _mutated(FULL, "profiles[1]", {}), "profiles[1].schedulerName")  # fmt: skip
    yield Case("name/empty name", "bad name",
               _mutated(FULL, "profiles[1].schedulerName", ""), "profiles[1].schedulerName")  # fmt: skip
    score = "profiles[0].plugins.score.enabled[0].name"
    for plugin in (
        "Nope",
        "imagelocality",
        "EBSLimits",
        "*",
        "",
        "ImageLocality ",
        "Image\nLocality",
    ):
        yield Case(f"plugin/{plugin!r}", "bad plugin", _mutated(FULL, score, plugin), score)
    # every upstream default is implemented now; the check stays for any future gap
    for plugin in sorted(NOT_IMPLEMENTED):
        path = "profiles[0].plugins.filter.disabled[0].name"
        doc = _set(FULL, _parse_path("profiles[0].plugins.filter.enabled"), [{"name": plugin}])
        yield Case(f"plugin/not implemented {plugin}", "bad plugin", _dump(doc),
                   path.replace("disabled", "enabled"))  # fmt: skip
    for point, plugin in (("score", "NodeName"), ("bind", "PrioritySort"),
                          ("queueSort", "DefaultBinder"), ("filter", "ImageLocality")):  # fmt: skip
        path = f"profiles[1].plugins.{point}.enabled[0].name"
        yield Case(f"plugin/{plugin} at {point}", "bad plugin",
                   _mutated(FULL, "profiles[1].plugins", {point: {"enabled": [{"name": plugin}]}}),
                   path)  # fmt: skip
    yield Case("plugin/enabled twice", "bad plugin",
               _mutated(FULL, "profiles[0].plugins.score.enabled",
                        [{"name": "ImageLocality"}, {"name": "ImageLocality"}]),
               "profiles[0].plugins.score.enabled[1].name")  # fmt: skip
    yield Case("plugin/no bind", "bad plugin",
               _mutated(FULL, "profiles[1].plugins", {"bind": {"disabled": [{"name": "*"}]}}),
               "profiles[1].plugins.bind")  # fmt: skip
    yield Case("plugin/no queue sort", "bad plugin",
               _mutated(FULL, "profiles[1].plugins", {"queueSort": {"disabled": [{"name": "*"}]}}),
               "profiles[1].plugins.queueSort")  # fmt: skip
    yield Case("plugin/extenders", "bad plugin", _with(FULL, extenders=[{"urlPrefix": "http://x"}]),
               "extenders")  # fmt: skip
    for i, name in enumerate(("Nope", "NodeResourcesFit", "", "EBSLimits")):
        doc = _set(FULL, _parse_path(f"{PF}[{i}].name"), name)
        field = f"{PF}[{i}].name" if name != "NodeResourcesFit" else f"{PF}[1].name"
        yield Case(f"pluginConfig/name {name!r} at {i}", "bad plugin", _dump(doc), field)
    yield Case("pluginConfig/args of a plugin without args", "bad args",
               _mutated(FULL, f"{PF}[0]", {"name": "NodePorts", "args": {"x": 1}}),
               f"{PF}[0].args.x")  # fmt: skip
    for v in ("v1", "kubescheduler.config.k8s.io/v1beta3", ""):
        yield Case(f"apiVersion={v!r}", "bad name", _with(FULL, apiVersion=v), "apiVersion")
    for v in ("Config", "kubeschedulerconfiguration", ""):
        yield Case(f"kind={v!r}", "bad name", _with(FULL, kind=v), "kind")
    for i in range(7):
        yield Case(f"args/kind {i}", "bad args", _mutated(FULL, f"{PF}[{i}].args.kind", "WrongArgs"),
                   f"{PF}[{i}].args.kind")  # fmt: skip
        yield Case(f"args/apiVersion {i}", "bad args",
                   _mutated(FULL, f"{PF}[{i}].args.apiVersion", "v9"),
                   f"{PF}[{i}].args.apiVersion")  # fmt: skip


NA = f"{PF}[3].args.addedAffinity"
REQ = f"{NA}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
BAD_ARGS: list[tuple[str, Any, str]] = [
    (f"{PF}[0].args.scoringStrategy.type", "Random", f"{PF}[0].args.scoringStrategy.type"),
    (f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio", None,
     f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio"),
    (f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio.shape", [],
     f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio.shape"),
    (f"{PF}[0].args.scoringStrategy.type", "MostAllocated",
     f"{PF}[0].args.scoringStrategy.requestedToCapacityRatio"),
    (f"{PF}[0].args.ignoredResources[0]", "bad resource!", f"{PF}[0].args.ignoredResources[0]"),
    (f"{PF}[0].args.ignoredResources[0]", "", f"{PF}[0].args.ignoredResources[0]"),
    (f"{PF}[0].args.ignoredResourceGroups[0]", "example.org/x",
     f"{PF}[0].args.ignoredResourceGroups[0]"),
    (f"{PF}[0].args.ignoredResourceGroups[0]", "-bad", f"{PF}[0].args.ignoredResourceGroups[0]"),
    (f"{PF}[0].args.scoringStrategy.resources[0].name", "", f"{PF}[0].args.scoringStrategy.resources[0].name"),
    (f"{PF}[0].args.scoringStrategy.resources", [{"name": "cpu"}, {"name": "cpu"}],
     f"{PF}[0].args.scoringStrategy.resources[1].name"),
    (f"{PF}[1].args.resources", [{"name": "cpu"}, {"name": "cpu"}], f"{PF}[1].args.resources[1].name"),
    (f"{PF}[4].args.defaultingType", "System", f"{PF}[4].args.defaultConstraints"),
    (f"{PF}[4].args.defaultingType", "Sometimes", f"{PF}[4].args.defaultingType"),
    (f"{PF}[4].args.defaultConstraints[0].topologyKey", "", f"{PF}[4].args.defaultConstraints[0].topologyKey"),
    (f"{PF}[4].args.defaultConstraints[0].topologyKey", "bad key!", f"{PF}[4].args.defaultConstraints[0].topologyKey"),
    (f"{PF}[4].args.defaultConstraints[0].whenUnsatisfiable", "Never",
     f"{PF}[4].args.defaultConstraints[0].whenUnsatisfiable"),
    (f"{PF}[4].args.defaultConstraints[0].whenUnsatisfiable", None,
     f"{PF}[4].args.defaultConstraints[0].whenUnsatisfiable"),
    (f"{PF}[4].args.defaultConstraints[0].labelSelector", {"matchLabels": {"a": "b"}},
     f"{PF}[4].args.defaultConstraints[0].labelSelector"),
    (f"{PF}[4].args.defaultConstraints[0].nodeAffinityPolicy", "Sometimes",
     f"{PF}[4].args.defaultConstraints[0].nodeAffinityPolicy"),
    (f"{PF}[4].args.defaultConstraints", [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
     f"{PF}[4].args.defaultConstraints[1].topologyKey"),
    (f"{PF}[6].args.mode", "Later", f"{PF}[6].args.mode"),
    (f"{PF}[6].args.victimScope", "Mine", f"{PF}[6].args.victimScope"),
    (f"{REQ}.matchExpressions[0].operator", "Like", f"{REQ}.matchExpressions[0].operator"),
    (f"{REQ}.matchExpressions[0].operator", ["In"], f"{REQ}.matchExpressions[0].operator"),
    (f"{REQ}.matchExpressions[0].key", "bad key!", f"{REQ}.matchExpressions[0].key"),
    (f"{REQ}.matchExpressions[0].values", [], f"{REQ}.matchExpressions[0].values"),
    (f"{REQ}.matchExpressions[0].values[0]", "bad value!", f"{REQ}.matchExpressions[0].values[0]"),
    (f"{REQ}.matchExpressions[0]", {"key": "n", "operator": "Gt", "values": ["x"]},
     f"{REQ}.matchExpressions[0].values"),
    (f"{REQ}.matchExpressions[0]", {"key": "n", "operator": "Gt", "values": ["99999999999999999999"]},
     f"{REQ}.matchExpressions[0].values"),
    (f"{REQ}.matchExpressions[0]", {"key": "n", "operator": "Exists", "values": ["x"]},
     f"{REQ}.matchExpressions[0].values"),
    (f"{REQ}.matchExpressions[0].extra", 1, f"{REQ}.matchExpressions[0].extra"),
    (f"{REQ}.matchFields", [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}],
     f"{REQ}.matchFields[0].values"),
    (f"{REQ}.matchFields", [{"key": "metadata.name", "operator": "Exists"}],
     f"{REQ}.matchFields[0].operator"),
    (f"{REQ}.matchFields", [{"key": "metadata.labels", "operator": "In", "values": ["a"]}],
     f"{REQ}.matchFields[0].key"),
]  # fmt: skip


def bad_args() -> Iterator[Case]:
    for path, value, field in BAD_ARGS:
        yield Case(f"args/{path}={value!r:.30}", "bad args", _mutated(FULL, path, value), field)


# ---------------------------------------------------------------- YAML pathologies

HEAD = f"apiVersion: {API}\nkind: {KIND}\n"


def _text(s: str) -> bytes:
    return s.encode()


def _bomb(levels: int, width: int, key: str = "lol") -> str:
    lines = [f"{key}0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"{key}{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def yaml_pathologies() -> Iterator[Case]:
    cat = "YAML"
    for where, indent in (("", ""), ("leaderElection", "  "), ("clientConnection", "  ")):
        block = f"{where}:\n" if where else ""
        for name, key in (("list key", "? [a, b]\n{i}: 1\n"), ("map key", "? {{a: b}}\n{i}: 1\n"),
                          ("flow map key", "{{a: 1}}: 2\n"), ("int key", "1: 2\n"),
                          ("bool key", "true: 2\n"), ("null key", "~: 2\n"),
                          ("float key", "1.5: 2\n"), ("date key", "2001-01-01: 2\n")):  # fmt: skip
            body = "".join(indent + line + "\n" for line in key.format(i=indent).splitlines())
            yield Case(f"yaml/{name} in {where or 'top'}", cat, _text(HEAD + block + body),
                       where or None)  # fmt: skip
    yield Case("yaml/list key in args", cat, _text(
        HEAD + "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n      ? [x]\n      : 1\n"
    ), "profiles[0].pluginConfig[0].args")  # fmt: skip
    for depth in (65, 100, 1000, 10_000, 100_000):
        yield Case(f"yaml/flow depth {depth}", cat,
                   _text(HEAD + "profiles: " + "[" * depth + "]" * depth + "\n"))  # fmt: skip
        yield Case(f"yaml/flow map depth {depth}", cat,
                   _text(HEAD + "leaderElection: " + "{a: " * depth + "1" + "}" * depth + "\n"))  # fmt: skip
    for depth in (65, 200, 3000):
        yield Case(f"yaml/block depth {depth}", cat,
                   _text(HEAD + "".join(" " * i + "a:\n" for i in range(depth)) + " " * depth + "1\n"))  # fmt: skip
        yield Case(f"yaml/block list depth {depth}", cat,
                   _text(HEAD + "profiles:\n" + "".join(" " * (2 * i) + "-\n" for i in range(depth))))  # fmt: skip
    for levels in range(4, 11):
        for width in (6, 9, 12):
            yield Case(f"yaml/bomb {levels}x{width}", cat, _text(HEAD + _bomb(levels, width)))
    yield Case("yaml/bomb in a field", cat,
               _text(HEAD + _bomb(9, 9).replace("lol8:", "parallelism:")))  # fmt: skip
    yield Case("yaml/bomb in profiles", cat,
               _text(_bomb(9, 9) + HEAD + "profiles: *a8\n"))  # fmt: skip
    for name, body in (("self list", "profiles: &p [*p]\n"), ("self map", "leaderElection: &m {x: *m}\n"),
                       ("nested self", "profiles: &p [{plugins: [*p]}]\n"),
                       ("undefined alias", "profiles: *nope\n"),
                       ("alias as key to list", "x: &k [1]\n*k : 1\n"),
                       ("merge of scalar", "<<: 5\n"), ("merge of list of scalars", "<<: [1, 2]\n")):  # fmt: skip
        yield Case(f"yaml/{name}", cat, _text(HEAD + body))
    for n in (2, 3, 10):
        yield Case(f"yaml/{n} documents", cat, _text(("---\n" + HEAD) * n))
    yield Case("yaml/trailing empty document", cat, _text(HEAD + "---\n"))
    yield Case("yaml/trailing null document", cat, _text(HEAD + "--- ~\n"))
    for ch in ("\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f", "\ufffe", "\uffff"):
        for where in ("start", "key", "value"):
            text = {"start": ch + HEAD, "key": HEAD + f"par{ch}allelism: 1\n",
                    "value": HEAD + f"parallelism: 1{ch}\n"}[where]  # fmt: skip
            yield Case(f"yaml/char {ord(ch):#x} at {where}", cat, _text(text))
    for name, body in (("tab indent", "leaderElection:\n\tleaderElect: true\n"),
                       ("unclosed flow", "profiles: [{schedulerName: a}\n"),
                       ("unclosed quote", 'parallelism: "3\n'),
                       ("bad indentation", "leaderElection:\n  leaderElect: true\n retryPeriod: 2s\n"),
                       ("nested mapping value", "parallelism: a: b\n"),
                       ("colon soup", ": : :\n"),
                       ("anchor without value", "parallelism: &\n"),
                       ("stray directive", "%YAML 1.1\n%YAML 1.1\n---\nkind: x\n"),
                       ("unknown directive only", "%FOO bar\n"),
                       ("reserved indicator", "parallelism: @x\n"),
                       ("block scalar junk", "parallelism: |x\n  1\n"),
                       ("flow in block key", "[a]: b\n"),
                       ("question without key", "?\n")):  # fmt: skip
        yield Case(f"yaml/syntax {name}", cat, _text(HEAD + body))
    bad_bytes = [b"\xff", b"\xfe\xff", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xe9",
                 b"\xf8\x88\x80\x80\x80", b"\xc0\xaf", b"\x80", b"\xf4\x90\x80\x80"]  # fmt: skip
    for b in bad_bytes:
        yield Case(f"yaml/bytes {b.hex()} at start", cat, b + HEAD.encode())
        yield Case(f"yaml/bytes {b.hex()} in value", cat,
                   HEAD.encode() + b"profiles:\n- schedulerName: caf" + b + b"\n")  # fmt: skip
    yield Case("yaml/utf-16 text", cat, HEAD.encode("utf-16"))
    yield Case("yaml/utf-32 text", cat, HEAD.encode("utf-32"))
    rng = random.Random(20261201)
    for i in range(60):
        size = rng.choice((1, 7, 64, 512, 4096, 65536))
        yield Case(f"yaml/junk {i} ({size} bytes)", cat, rng.randbytes(size))
    for i in range(20):  # printable junk: decodes, then fails to parse or to be a config
        size = rng.choice((3, 40, 400, 4000))
        chars = "".join(rng.choice("{}[]:,-?&*!|>'\"%@`#\n ab1") for _ in range(size))
        yield Case(f"yaml/printable junk {i}", cat, _text(chars))
    big = 1 << 20
    yield Case("yaml/1 MiB + 1 of comments", cat, b"#" * (big + 1))
    yield Case("yaml/2 MiB config", cat, (HEAD + "# " + "x" * (2 * big) + "\n").encode())
    yield Case("yaml/900 KB unknown field value", cat,
               _text(HEAD + "hugeField: " + "x" * 900_000 + "\n"), "hugeField")  # fmt: skip
    yield Case("yaml/900 KB schedulerName", cat,
               _text(HEAD + "profiles:\n- schedulerName: " + "x" * 900_000 + "\n"),
               "profiles[0].schedulerName")  # fmt: skip
    yield Case("yaml/900 KB key", cat, _text(HEAD + "k" * 900_000 + ": 1\n"))
    yield Case("yaml/200k-entry list", cat, _text(HEAD + "profiles: [" + "1," * 200_000 + "1]\n"))
    yield Case("yaml/5000-digit int", cat, _text(HEAD + "parallelism: " + "9" * 5000 + "\n"))
    yield Case("yaml/1e400 float qps", cat, _text(HEAD + "clientConnection:\n  qps: 1e400\n"),
               "clientConnection.qps")  # fmt: skip
    yield Case("yaml/huge weight", cat, _text(
        HEAD + "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n"
        "        weight: 1000000000000000000000\n"), "profiles[0].plugins.score.enabled[0].weight")  # fmt: skip
    for name, body, field in (
        ("python object", "parallelism: !!python/object:os.system 1\n", "parallelism"),
        ("python name", "parallelism: !!python/name:os.system\n", "parallelism"),
        ("custom tag", "parallelism: !foo 1\n", "parallelism"),
        ("set", "profiles: !!set {a, b}\n", "profiles"),
        ("omap", "profiles: !!omap [a: 1]\n", "profiles"),
        ("pairs", "leaderElection: !!pairs [a: 1]\n", "leaderElection"),
        ("binary in str", "profiles:\n- schedulerName: !!binary aGVsbG8=\n", "profiles[0].schedulerName"),
        ("timestamp in int", "parallelism: 2001-12-14\n", "parallelism"),
        ("int tag on text", "parallelism: !!int abc\n", "parallelism"),
        ("float tag on text", "clientConnection:\n  qps: !!float fast\n", "clientConnection.qps"),
        ("bool tag on text", "enableProfiling: !!bool maybe\n", "enableProfiling"),
        ("str tag on int field", "parallelism: !!str 3\n", "parallelism"),
        ("null tag on list", "profiles: !!null [1]\n", "profiles"),
        ("map tag on list", "profiles: !!map [1]\n", "profiles"),
        ("seq tag on map", "leaderElection: !!seq {a: 1}\n", "leaderElection"),
    ):  # fmt: skip
        yield Case(f"yaml/tag {name}", cat, _text(HEAD + body), field)
    for name, text in (("scalar int", "42\n"), ("scalar str", "hello\n"), ("scalar bool", "true\n"),
                       ("empty string", "''\n"), ("list", "- a\n- b\n"), ("flow list", "[]\n"),
                       ("empty map", "{}\n"), ("empty", ""), ("comments", "# a\n# b\n"),
                       ("whitespace", "   \n\n  \n"), ("bom only", "\ufeff"), ("null", "~\n"),
                       ("document end only", "...\n"), ("separator only", "---\n"),
                       ("kind only", f"kind: {KIND}\n"), ("apiVersion only", f"apiVersion: {API}\n")):  # fmt: skip
        yield Case(f"yaml/document {name}", cat, _text(text))
    for where in ("parallelism", "leaderElection.leaseDuration", "profiles"):
        key = where.split(".")[-1]
        body = {"parallelism": "parallelism: 1\nparallelism: 2\n",
                "leaderElection.leaseDuration": "leaderElection:\n  leaseDuration: 1m\n  leaseDuration: 2m\n",
                "profiles": "profiles: []\nprofiles: []\n"}[where]  # fmt: skip
        yield Case(f"yaml/duplicate {key}", cat, _text(HEAD + body), where)
    yield Case("yaml/duplicate apiVersion", cat, _text(HEAD + f"apiVersion: {API}\n"), "apiVersion")
    yield Case("yaml/merge then unknown", cat, _text(HEAD + "<<: {bogus: 1}\n"), "bogus")


GENERATORS: list[Callable[[], Iterator[Case]]] = [
    wrong_types, unknown_fields, ranges, durations, names, bad_args, yaml_pathologies,
]  # fmt: skip


def corpus() -> list[Case]:
    cases = [c for gen in GENERATORS for c in gen()]
    ids = Counter(c.id for c in cases)
    dup = [i for i, n in ids.items() if n > 1]
    if dup:  # keep ids unique (they name test cases)
        seen: Counter[str] = Counter()
        out = []
        for c in cases:
            seen[c.id] += 1
            out.append(
                Case(f"{c.id}#{seen[c.id]}", c.category, c.data, c.field) if c.id in dup else c
            )
        cases = out
    return cases


# ---------------------------------------------------------------- verdicts

_LOCATION = re.compile(r"\bline \d+|\boffset \d+|larger than \d+ bytes|empty configuration|"
                       r"must be a KubeSchedulerConfiguration object|not valid UTF-8")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Verdict:
    case: Case
    refused: bool
    one_line: bool
    field_named: bool
    seconds: float
    message: str
    exit_code: int | None = None  # through the process only
    cpu_seconds: float | None = None  # through the process only: the child's user + sys

    @property
    def ok(self) -> bool:
        exit_ok = self.exit_code is None or self.exit_code == 2
        return (
            self.refused and self.one_line and self.field_named and exit_ok
            and self.seconds < MAX_SECONDS
        )  # fmt: skip


def _names_field(case: Case, field: str, line: str) -> bool:
    if case.field is not None:
        return field == case.field and line.startswith(PREFIX + field + ": ")
    return bool(field) or bool(_LOCATION.search(line))


def check_in_process(case: Case) -> Verdict:
    """Load through scheduler.config, as `run --config` does before anything else."""
    started = time.perf_counter()
    try:
        config_from_bytes(case.data)
    except ConfigError as e:
        seconds = time.perf_counter() - started
        line = PREFIX + str(e)
        return Verdict(case, True, len(line.splitlines()) == 1 and "\n" not in line,
                       _names_field(case, e.field, line), seconds, line)  # fmt: skip
    except Exception as e:  # a crash: the very thing this corpus is about
        seconds = time.perf_counter() - started
        return Verdict(case, False, False, False, seconds, f"{type(e).__name__}: {e}"[:300])
    return Verdict(case, False, True, False, time.perf_counter() - started, "accepted")


def run_counting_cpu(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, bytes, float]:
    """Run `argv`; its exit code, its stderr and the CPU (user + sys) of that process
    alone. The rusage comes from os.wait4 on its pid: RUSAGE_CHILDREN deltas also count
    any other child reaped meanwhile (subprocess reaps abandoned ones when it starts a
    new process), which made a budget fail with another test's CPU."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env
    )
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        assert proc.stderr is not None
        stderr = proc.stderr.read()  # to EOF: the process has closed it (exited or killed)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
        if proc.stderr is not None:
            proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return proc.returncode, stderr, usage.ru_utime + usage.ru_stime


def check_process(case: Case, workdir: Path) -> Verdict:
    """`python -m scheduler run --config F` as a subprocess: exit code, stderr, wall time."""
    path = workdir / "config.yaml"
    path.write_bytes(case.data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    returncode, stderr, cpu = run_counting_cpu(
        [sys.executable, "-m", "scheduler", "run", "--config", str(path),
         "--kubeconfig", str(workdir / "absent-kubeconfig"), "--secure-port", "0"],
        cwd=ROOT, env=env, timeout=30.0,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    err = stderr.decode("utf-8", "replace")
    lines = err.splitlines()
    line = lines[0] if lines else ""
    field = ""
    if case.field is not None and line.startswith(PREFIX + case.field + ": "):
        field = case.field
    elif line.startswith(PREFIX) and re.match(r"[^ :]+: ", line[len(PREFIX) :]):
        field = line[len(PREFIX) :].split(": ", 1)[0]
    return Verdict(
        case, returncode != 0, len(lines) == 1 and err.endswith("\n") and err.count("\n") == 1,
        _names_field(case, field, line), seconds, line[:300], returncode, cpu,
    )  # fmt: skip


def spread_sample(cases: Sequence[Case], n: int) -> list[Case]:
    """n cases spread over every category (deterministic)."""
    by_cat: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_cat[c.category].append(c)
    out: list[Case] = []
    cats = sorted(by_cat)
    i = 0
    while len(out) < min(n, len(cases)):
        for cat in cats:
            pool = by_cat[cat]
            if i < len(pool) and len(out) < n:
                # stride through the category so the sample is not just its first cases
                out.append(pool[(i * 7919) % len(pool)])
        i += 1
    return list(dict.fromkeys(out))


def _cpu_max(vs: Sequence[Verdict]) -> str:
    cpus = [v.cpu_seconds for v in vs if v.cpu_seconds is not None]
    return f"{max(cpus) * 1000:.1f}" if cpus else "-"


def summary(verdicts: Sequence[Verdict], title: str) -> str:
    rows: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        rows[v.case.category].append(v)
    head = (
        f"{'category':<16}{'cases':>7}{'refused':>9}{'1 line':>8}{'field':>7}{'exit 2':>8}"
        f"{'<1s':>6}{'max ms':>9}{'cpu max ms':>12}{'ok':>6}"
    )
    out = [title, head, "-" * len(head)]
    for cat, vs in [*sorted(rows.items()), ("ALL", list(verdicts))]:
        exits = [v for v in vs if v.exit_code is not None]
        out.append(
            f"{cat:<16}{len(vs):>7}{sum(v.refused for v in vs):>9}{sum(v.one_line for v in vs):>8}"
            f"{sum(v.field_named for v in vs):>7}"
            f"{(str(sum(v.exit_code == 2 for v in exits)) if exits else '-'):>8}"
            f"{sum(v.seconds < MAX_SECONDS for v in vs):>6}"
            f"{max(v.seconds for v in vs) * 1000:>9.1f}"
            f"{_cpu_max(vs):>12}{sum(v.ok for v in vs):>6}"
        )
    bad = [v for v in verdicts if not v.ok]
    for v in bad[:20]:
        out.append(f"FAIL {v.case.id}: {v.message[:200]}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.config_corpus", description=__doc__.split("\n")[0]
    )
    p.add_argument("--cli", default="0", help="cases through the real process: a number or 'all'")
    args = p.parse_args(argv)
    cases = corpus()
    verdicts = [check_in_process(c) for c in cases]
    print(summary(verdicts, f"in-process loader: {len(cases)} malformed files"))
    failed = any(not v.ok for v in verdicts)
    n = len(cases) if args.cli == "all" else int(args.cli)
    if n:
        sample = cases if n >= len(cases) else spread_sample(cases, n)
        with tempfile.TemporaryDirectory() as tmp:
            pv = [check_process(c, Path(tmp)) for c in sample]
        print()
        print(summary(pv, f"real process (python -m scheduler run --config F): {len(pv)} files"))
        times = sorted(v.seconds for v in pv)
        cpus = sorted(v.cpu_seconds or 0.0 for v in pv)
        for name, xs in (("wall time", times), ("CPU time", cpus)):
            print(f"process {name}: median {xs[len(xs) // 2] * 1000:.0f} ms, "
                  f"p99 {xs[int(len(xs) * 0.99)] * 1000:.0f} ms, max {xs[-1] * 1000:.0f} ms")  # fmt: skip
        failed = failed or any(not v.ok for v in pv)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
