"""Device binding conditions as upstream reads them: ready once every condition is True,
failed (with upstream's words) once a failure condition is True, timed out past the
binding timeout after the allocation."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra.binding_conditions import (
    BINDING_TIMEOUT_SECONDS,
    DeviceBindingError,
    claim_ready,
    claim_timed_out,
    has_binding_conditions,
)
from scheduler.dra.resources import ClaimRecord, claim_from_dict


def _claim(conditions: list[dict[str, Any]] | None, binding: bool = True) -> ClaimRecord:
    result: dict[str, Any] = {"request": "r", "driver": "f", "pool": "p", "device": "d"}
    if binding:
        result["bindingConditions"] = ["attached", "configured"]
        result["bindingFailureConditions"] = ["failed"]
    status: dict[str, Any] = {
        "allocation": {
            "devices": {"results": [result]},
            "allocationTimestamp": "2026-12-06T10:00:00Z",
        }
    }
    if conditions is not None:
        status["devices"] = [{"driver": "f", "pool": "p", "device": "d", "conditions": conditions}]
    return claim_from_dict(
        {"metadata": {"name": "c", "namespace": "ns", "uid": "u"},
         "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
         "status": status}
    )  # fmt: skip


def _cond(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_ready_once_every_binding_condition_is_true() -> None:
    assert not claim_ready(_claim(None))  # the driver has said nothing yet
    assert not claim_ready(_claim([_cond("attached", "True")]))
    assert claim_ready(_claim([_cond("attached", "True"), _cond("configured", "True")]))
    assert claim_ready(_claim(None, binding=False))  # no conditions to wait for
    assert has_binding_conditions([_claim(None)])
    assert not has_binding_conditions([_claim(None, binding=False)])


def test_a_true_failure_condition_fails_with_upstreams_words() -> None:
    claim = _claim([_cond("attached", "True"), _cond("failed", "True", "NoPath", 'no "link"')])
    with pytest.raises(DeviceBindingError) as failed:
        claim_ready(claim)
    assert str(failed.value) == (
        'device binding failed: claim=c, reason=NoPath, message="no \\"link\\""'
    )


def test_a_claim_times_out_only_past_the_binding_timeout() -> None:
    claim = _claim(None)
    allocated = claim.allocation_timestamp
    assert allocated is not None
    assert not claim_timed_out(claim, allocated + BINDING_TIMEOUT_SECONDS - 1)
    assert claim_timed_out(claim, allocated + BINDING_TIMEOUT_SECONDS + 1)
    assert not claim_timed_out(
        _claim(None, binding=False), allocated + 10 * BINDING_TIMEOUT_SECONDS
    )
