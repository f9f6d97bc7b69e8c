"""The fault suite's audit-log reader (tests/faults/audit.py): a dry-run DELETE (the
scheduler's preflight of an all-members PodGroup) is told apart by its requestURI and
never counts as a victim's deletion."""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults.audit import AuditLog, parse


def _event(audit_id: str, uri: str, code: int = 200) -> str:
    return json.dumps({
        "auditID": audit_id,
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": "delete",
        "user": {"username": "fault-scheduler-a"},
        "objectRef": {"resource": "pods", "namespace": "ns", "name": "m0"},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": "2026-01-01T00:00:00.000000Z",
        "stageTimestamp": "2026-01-01T00:00:00.010000Z",
    })  # fmt: skip


def test_a_dry_run_delete_is_not_a_deletion(tmp_path: Path) -> None:
    lines = [
        _event("1", "/api/v1/namespaces/ns/pods/m0?dryRun=All&timeout=30000ms"),
        _event("2", "/api/v1/namespaces/ns/pods/m0?timeout=30000ms"),
        _event("3", "/api/v1/namespaces/ns/pods/m0?timeout=30000ms&dryRun=All", code=403),
    ]
    assert [c.dry_run for c in parse(lines)] == [True, False, True]
    path = tmp_path / "audit.log"
    path.write_text("\n".join(lines) + "\n")
    log = AuditLog(path)
    assert [c.dry_run for c in log.pod_deletes({"ns"})] == [False]
    assert [c.code for c in log.dry_run_deletes({"ns"})] == [200, 403]
