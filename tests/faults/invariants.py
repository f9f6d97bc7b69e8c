"""The invariants every case checks, read from the API server's own state: its audit
log (which writes took effect, by whom, when) and its objects (final placement), never
from the scheduler's metrics or logs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from tests.checker import check as check_placement
from tests.faults.audit import Call, per_pod
from tests.faults.harness import SCHED, Bed
from tests.faults.result import CaseResult
from tests.webhook import DeleteWebhook


def _examples(counts: Counter[str], limit: int = 5) -> str:
    return ", ".join(f"{k} x{v}" for k, v in counts.most_common(limit))


def bound_at_most_once(result: CaseResult, binds: list[Call]) -> None:
    """Every pod got at most one binding that the API server accepted; attempts refused
    as conflicts (the pod was bound already) are reported as a figure: a scheduler that
    tries to bind a bound pod raced someone."""
    ok = per_pod(binds)
    twice = Counter({k: v for k, v in ok.items() if v > 1})
    conflicts = Counter(c.pod for c in binds if c.code == 409)
    result.figure("binds accepted", sum(ok.values()))
    result.figure("bind conflicts (409)", sum(conflicts.values()))
    result.check(
        "no pod bound twice (audit: accepted bindings per pod <= 1)",
        not twice,
        _examples(twice) if twice else f"{len(ok)} pods bound once each",
    )


def deleted_at_most_once(
    result: CaseResult, deletes: list[Call], victims: int | None = None
) -> None:
    """Each victim was deleted by the scheduler at most once (audit: DELETEs that took
    effect, per pod); `victims` is how many victims the case needed at least."""
    ok = per_pod(deletes)
    twice = Counter({k: v for k, v in ok.items() if v > 1})
    result.figure("victims deleted", len(ok))
    result.figure("victim DELETEs refused or failed", sum(1 for c in deletes if not c.ok))
    result.check(
        "each victim deleted once (audit: accepted DELETEs per pod <= 1)",
        not twice,
        _examples(twice) if twice else f"{len(ok)} victims",
    )
    if victims is not None:
        result.check(
            f"preemption happened (>= {victims} victims deleted)",
            len(ok) >= victims,
            f"{len(ok)} deleted",
        )


def webhook_admitted_once(
    result: CaseResult, hook: DeleteWebhook, deletes: list[Call] | None = None
) -> None:
    """The DELETE-counting admission webhook's view: admitted (not refused) DELETEs by
    anyone but kwok, per pod.

    The webhook counts admission *calls* from every client but kwok, not the scheduler's
    requests: a victim the churn deletes at the same moment is counted once for each
    client, and kube-apiserver runs validating admission inside the retried update of a
    graceful delete (apiserver registry Store.Delete ->
    updateForGracefulDeletionAndFinalizers), so one DELETE can reach the webhook twice
    when the pod changes meanwhile. Seen in the 30-minute soak: two calls for a victim
    the churn deleted too, one audited scheduler request (answered 404). With the audit
    log's scheduler DELETEs (`deletes`), a pod counts as deleted twice only when the audit
    log holds more than one DELETE request by a scheduler for it."""
    admitted = Counter({k: v - hook.refused[k] for k, v in hook.deletes.items()})
    twice = Counter({k: v for k, v in admitted.items() if v > 1})
    result.figure("webhook: DELETE calls", sum(hook.deletes.values()))
    result.figure("webhook: refused", sum(hook.refused.values()))
    detail = _examples(twice) if twice else f"{len(admitted)} pods"
    if twice and deletes is not None:
        t0 = min((c.received for c in deletes), default=0.0)
        for pod in list(twice)[:3]:
            calls = [c for c in deletes if c.name == pod]
            detail += f"; {pod}: " + ", ".join(
                f"{c.user} {c.code} at +{c.received - t0:.2f}s" for c in calls
            )
        # the audit log is the record of requests: repeated admission calls of one
        # request are the API server's, not a second DELETE
        requested = Counter(c.name for c in deletes)
        twice = Counter({k: v for k, v in twice.items() if requested[k] > 1})
        result.figure(
            "webhook: repeated admission calls of one request",
            len([k for k, v in admitted.items() if v > 1 and requested[k] <= 1]),
        )
    result.check(
        "each victim deleted once (webhook: admitted DELETEs per pod <= 1, "
        "repeated admission of one audited request aside)",
        not twice,
        detail,
    )


def overcommit_violations(bed: Bed) -> list[str]:
    """tests/checker.py's resource and pod-count violations (terminating pods count:
    they hold their node until they are gone, for upstream and for us)."""
    report = check_placement(bed.pods(), bed.nodes(), {}, SCHED)
    return [v for v in report.violations if "over-committed" in v or " pods > allowed" in v]


def no_overcommit(result: CaseResult, bed: Bed, violations: Iterable[str] | None = None) -> None:
    found = list(overcommit_violations(bed) if violations is None else violations)
    result.check(
        "no node over-committed (tests/checker.py on the API server's pods and nodes)",
        not found,
        "; ".join(found[:5]),
    )


def unbound(pods: list[dict[str, Any]], names: set[str] | None = None) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if not p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and (names is None or p["metadata"]["name"] in names)
    )
