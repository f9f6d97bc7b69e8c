"""A validating admission webhook on Lease UPDATEs that slows the scheduler replicas'
renewals of their Lease and tells when one is in flight, so a case can freeze the
leader exactly while its renewal waits on the API server.

Everything else (other Leases, other users) is admitted at once; failurePolicy Ignore,
so the webhook going away never blocks the control plane's own Leases."""

from __future__ import annotations

import base64
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from tests.faults.audit import SCHEDULER_GROUP
from tests.faults.harness import LEASE_NAME, LEASE_NAMESPACE, Bed
from tests.webhook import serve_admission

NAME = "fault-suite-lease-delay"


class LeaseDelayWebhook:
    def __init__(self, bed: Bed, delay: float) -> None:
        self.bed = bed
        self.delay = delay
        self.in_flight: dict[str, int] = {}  # user -> renewals waiting in the webhook
        self.calls = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        user = req.get("userInfo", {}).get("username", "")
        ours = req.get("name") == LEASE_NAME and SCHEDULER_GROUP in (
            req.get("userInfo", {}).get("groups") or []
        )
        if ours:
            with self._lock:
                self.calls += 1
                self.in_flight[user] = self.in_flight.get(user, 0) + 1
            try:
                time.sleep(self.delay)
            finally:
                with self._lock:
                    self.in_flight[user] -= 1
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": req["uid"], "allowed": True},
        }

    def renewing(self, user: str) -> bool:
        with self._lock:
            return self.in_flight.get(user, 0) > 0

    def start(self) -> LeaseDelayWebhook:
        local = self.bed.local
        server = serve_admission(
            self._review, local.pki_dir, local.dir / "webhook" / "leases", NAME
        )
        self._server = server
        ca = base64.b64encode(local.ca_file.read_bytes()).decode()
        self.bed.cluster.api(
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "metadata": {"name": NAME},
                "webhooks": [{
                    "name": "lease-delay.tests.kube-async-scheduler.io",
                    "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/",
                                     "caBundle": ca},
                    "rules": [{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                               "operations": ["UPDATE"], "resources": ["leases"],
                               "scope": "Namespaced"}],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": LEASE_NAMESPACE}},
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10,
                }],
            },
        )  # fmt: skip
        return self

    def wait_active(self, timeout: float) -> bool:
        """True once a renewal has gone through the webhook (the API server loads new
        webhook configurations asynchronously)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.calls:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        self.bed.cluster.admin.request(
            "DELETE",
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{NAME}",
        )
        if self._server is not None:
            self._server.shutdown()
            self._server = None
