"""The API server's own record of what the schedulers did: its audit log.

The fault suite starts kube-apiserver with an audit policy that records, at Metadata
level, only the writes made by the scheduler replicas under test (each replica has a
client certificate of its own, all in one group). From the log we know, without asking
the scheduler, which pod each replica bound and when, which pods it deleted, and when
it renewed its Lease. A request in flight when the API server is SIGKILLed has no
ResponseComplete record: it never took effect as far as any client can tell.

A dry run (the scheduler's preflight of an all-members PodGroup's DELETEs,
scheduler/preemption/unit_evictions.py) is audited as the request it is, with
`dryRun=All` in its requestURI; it changes nothing, so `pod_deletes` leaves it out
and `dry_run_deletes` lists it."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SCHEDULER_GROUP = "fault-suite:schedulers"


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        # one record per request, written when the response is complete
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [
            {
                "level": "Metadata",
                "userGroups": [SCHEDULER_GROUP],
                "verbs": ["create", "update", "patch", "delete"],
                "resources": [
                    {"group": "", "resources": ["pods", "pods/binding", "pods/status"]},
                    {"group": "coordination.k8s.io", "resources": ["leases"]},
                    {"group": "events.k8s.io", "resources": ["events"]},
                ],
            },
            {"level": "None"},
        ],
    }


def apiserver_args(policy_file: Path, log_file: Path) -> list[str]:
    policy_file.write_text(json.dumps(policy()))
    return [
        f"--audit-policy-file={policy_file}",
        f"--audit-log-path={log_file}",
        "--audit-log-format=json",
        # blocking: the record is written before the response leaves, so a completed
        # call is never missing from the log
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
    ]


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Call:
    """One completed write by a scheduler replica."""

    user: str
    verb: str
    resource: str  # "pods", "pods/binding", "leases", ...
    namespace: str
    name: str
    code: int
    received: float  # epoch seconds, when the API server received it
    completed: float  # epoch seconds, when the response was complete
    dry_run: bool = False  # `dryRun=All` in the requestURI: nothing was stored

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}"


def _dry_run(uri: str) -> bool:
    return "All" in parse_qs(urlsplit(uri).query).get("dryRun", [])


def parse(lines: Iterable[str]) -> list[Call]:
    """Calls in log order. Torn lines (the API server SIGKILLed mid-write) are skipped."""
    out: list[Call] = []
    seen: set[str] = set()
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("stage") != "ResponseComplete" or ev.get("auditID") in seen:
            continue
        seen.add(ev.get("auditID", ""))
        ref = ev.get("objectRef") or {}
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        out.append(
            Call(
                user=str((ev.get("user") or {}).get("username") or ""),
                verb=str(ev.get("verb") or ""),
                resource=resource,
                namespace=str(ref.get("namespace") or ""),
                name=str(ref.get("name") or ""),
                code=int((ev.get("responseStatus") or {}).get("code") or 0),
                received=_epoch(ev.get("requestReceivedTimestamp")),
                completed=_epoch(ev.get("stageTimestamp")),
                dry_run=_dry_run(str(ev.get("requestURI") or "")),
            )
        )
    return out


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[Call]:
        try:
            with self.path.open(errors="replace") as f:
                return parse(f)
        except FileNotFoundError:
            return []

    def binds(self, namespaces: set[str] | None = None) -> list[Call]:
        return [
            c
            for c in self.calls()
            if c.verb == "create"
            and c.resource == "pods/binding"
            and (namespaces is None or c.namespace in namespaces)
        ]

    def pod_deletes(self, namespaces: set[str] | None = None) -> list[Call]:
        """Pod DELETEs that could delete: dry runs left out."""
        return [c for c in self._pod_deletes(namespaces) if not c.dry_run]

    def dry_run_deletes(self, namespaces: set[str] | None = None) -> list[Call]:
        return [c for c in self._pod_deletes(namespaces) if c.dry_run]

    def _pod_deletes(self, namespaces: set[str] | None) -> list[Call]:
        return [
            c
            for c in self.calls()
            if c.verb == "delete"
            and c.resource == "pods"
            and (namespaces is None or c.namespace in namespaces)
        ]

    def lease_writes(self, name: str) -> list[Call]:
        return [
            c
            for c in self.calls()
            if c.resource == "leases" and c.name == name and c.verb in ("create", "update")
        ]


def per_pod(calls: Iterable[Call], ok_only: bool = True) -> Counter[str]:
    return Counter(c.pod for c in calls if c.ok or not ok_only)
