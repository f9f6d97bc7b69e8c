"""Counting the API calls of the process under test from the API server's audit log.

apiserver_request_total has no user or user-agent label, so the harness gives the
scheduler under test an identity of its own (a ServiceAccount token) and starts the API
server with an audit policy that records only that user's requests, at Metadata level.
Every request is counted once (by auditID), keyed by verb and resource[/subresource]."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SA_NAMESPACE = "kube-system"
SA_NAME = "bench-scheduler"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"


def policy(user: str = SA_USER) -> dict[str, Any]:
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "Metadata", "users": [user]},
            {"level": "None"},
        ],
    }


def apiserver_args(policy_file: Path, log_file: Path) -> list[str]:
    return [
        f"--audit-policy-file={policy_file}",
        f"--audit-log-path={log_file}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
    ]


def count_calls(lines: Iterable[str], user: str = SA_USER) -> dict[str, Any]:
    """{"total": n, "by_call": {"create pods/binding": n, ...}, "user_agents": {...}}"""
    seen: set[str] = set()
    by_call: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("user", {}).get("username") != user:
            continue
        aid = ev.get("auditID")
        if aid in seen:
            continue
        seen.add(aid)
        ref = ev.get("objectRef") or {}
        resource = ref.get("resource") or ev.get("requestURI", "?").split("?")[0]
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        by_call[f"{ev.get('verb', '?')} {resource}"] += 1
        agents[(ev.get("userAgent") or "?").split(" ")[0]] += 1
    return {
        "total": sum(by_call.values()),
        "by_call": dict(by_call.most_common()),
        "user_agents": dict(agents),
    }


def count_file(path: Path, user: str = SA_USER) -> dict[str, Any]:
    try:
        with path.open(errors="replace") as f:
            return count_calls(f, user)
    except OSError:
        return {"total": None, "by_call": {}, "user_agents": {}}
