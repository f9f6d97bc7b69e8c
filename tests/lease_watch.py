"""Watch a Lease from the API server and measure its renewals (test helper, no mocks).

The renewal gap is measured on the Lease object itself, as every other candidate sees
it: the difference between consecutive spec.renewTime values written by the holder, plus
the time since the last one when the watch ends (a holder that stopped renewing leaves
an open gap). Leader changes are holder changes seen on the stream.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kas_dev.cluster.api import AdminClient

__all__ = ["LeaseWatcher", "RenewalFigures"]


def _parse_micro_time(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


@dataclass
class RenewalFigures:
    renewals: int
    longest_gap: float
    holders: list[str] = field(default_factory=list)
    transitions: int = 0

    @property
    def leader_changes(self) -> int:
        return max(0, len(self.holders) - 1)


class LeaseWatcher:
    """A thread that follows one Lease with a real watch until `stop()`."""

    def __init__(self, admin: AdminClient, namespace: str, name: str) -> None:
        self._admin = admin
        self._path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
            f"?watch=true&fieldSelector=metadata.name%3D{name}&timeoutSeconds=600"
        )
        self._renew_times: list[float] = []
        self._holders: list[str] = []
        self._transitions = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="lease-watch", daemon=True)
        self._response: Any = None

    def start(self) -> LeaseWatcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            req = urllib.request.Request(self._admin.server + self._path)
            try:
                with urllib.request.urlopen(req, context=self._admin._ctx, timeout=30) as resp:
                    self._response = resp
                    for line in resp:
                        if self._stop.is_set():
                            return
                        if line.strip():
                            self._record(json.loads(line))
            except Exception:  # a broken stream, or closed under us by stop()
                if self._stop.is_set():
                    return
                time.sleep(0.2)  # the stream broke: reconnect (the next event re-syncs)

    def _record(self, event: dict[str, Any]) -> None:
        spec = (event.get("object") or {}).get("spec") or {}
        renew = spec.get("renewTime")
        holder = spec.get("holderIdentity") or ""
        with self._lock:
            if renew:
                moment = _parse_micro_time(renew)
                if not self._renew_times or moment != self._renew_times[-1]:
                    self._renew_times.append(moment)
            if holder and (not self._holders or self._holders[-1] != holder):
                self._holders.append(holder)
            self._transitions = int(spec.get("leaseTransitions") or 0)

    def figures(self) -> RenewalFigures:
        """Figures so far; the open gap since the last renewal counts too."""
        with self._lock:
            times = sorted(self._renew_times)
            gaps = [b - a for a, b in itertools.pairwise(times)]
            if times:
                gaps.append(time.time() - times[-1])
            return RenewalFigures(
                renewals=len(times),
                longest_gap=max(gaps, default=0.0),
                holders=list(self._holders),
                transitions=self._transitions,
            )

    def stop(self) -> None:
        self._stop.set()
        if self._response is not None:
            with contextlib.suppress(Exception):
                self._response.close()
        self._thread.join(timeout=5)
