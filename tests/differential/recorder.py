"""The oracle's admission webhook: it records, and refuses, every bind and pod DELETE the
two schedulers send, so both always decide on identical cluster state.

A bind (pods/binding CREATE) names the pod and the chosen node; a DELETE names a victim,
and so does the DisruptionTarget condition a preemption writes to each victim before its
DELETE (a pods/status update, refused as well: written, it would be a pod update that
moves the victim in the other scheduler's node pod list, upstream's NodeInfo order).
VolumeBinding's PreBind writes come before the bind: a PV update (claimRef) or a PVC
update (selected-node annotation) is refused too, and names the claim and the node (the
PV's hostname affinity, the annotation), which stands for the bind it precedes.
The two schedulers authenticate with client certificates of their own (users
`oracle-upstream` and `oracle-ours`), so each request is attributed to the scheduler that
sent it. Requests from anyone else (the harness binding existing pods, kwok) pass.
"""

from __future__ import annotations

import base64
import threading
import time
from collections import defaultdict
from http.server import ThreadingHTTPServer
from typing import Any

from tests.kube import ClusterHandle
from tests.webhook import serve_admission

WEBHOOK_NAME = "oracle-recorder"
# A preemption deletes its victims in parallel and gives up on the rest once one DELETE
# fails (upstream's preemption executor cancels the others): each DELETE is held this
# long before it is refused, so every victim's DELETE has arrived by then.
DELETE_HOLD = 2.0


class Recorder:
    def __init__(self, cluster: ClusterHandle, users: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.users = frozenset(users)
        # user -> pod key -> first node it tried to bind the pod to
        self.binds: dict[str, dict[str, str]] = defaultdict(dict)
        # user -> victims (pod keys) in the order their DELETE first arrived
        self.deletes: dict[str, list[str]] = defaultdict(list)
        # user -> claim key -> the node of its first PreBind write
        self.volume_writes: dict[str, dict[str, str]] = defaultdict(dict)
        self._lock = threading.Lock()
        # seconds a refused bind is held before the answer (the gang oracle: no member's
        # refused bind frees its node before every member's first outcome is read)
        self.bind_hold = 0.0
        self._server: ThreadingHTTPServer | None = None
        self.probe_seen = threading.Event()

    # ---- the review ------------------------------------------------------------------
    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        user = req.get("userInfo", {}).get("username", "")
        ns, name = req.get("namespace", ""), req.get("name", "")
        key = f"{ns}/{name}"
        if name == "oracle-probe":
            self.probe_seen.set()
        refuse = user in self.users
        resource = (req.get("resource") or {}).get("resource", "")
        if resource == "pods" and req.get("subResource") == "status":
            # a victim's DisruptionTarget condition, written before its DELETE: refused
            # too, or the first scheduler to preempt would change (the order of) the
            # pods the other is about to choose among; anything else (the preemptor's
            # own PodScheduled and nomination) passes
            refuse = refuse and _marks_victim(req)
        if refuse and resource in ("persistentvolumes", "persistentvolumeclaims"):
            claim, node = _volume_write(req.get("object") or {}, resource)
            with self._lock:
                self.volume_writes[user].setdefault(claim, node)
        elif refuse:
            with self._lock:
                if req.get("subResource") == "binding":
                    obj = req.get("object") or {}
                    node = str((obj.get("target") or {}).get("name", ""))
                    self.binds[user].setdefault(key, node)
                elif key not in self.deletes[user]:
                    self.deletes[user].append(key)
            if req.get("operation") == "DELETE" or req.get("subResource") == "status":
                time.sleep(DELETE_HOLD)  # every parallel call of a preemption arrives
            elif req.get("subResource") == "binding" and self.bind_hold:
                time.sleep(self.bind_hold)
        response: dict[str, Any] = {"uid": req["uid"], "allowed": not refuse}
        if refuse:
            response["status"] = {"code": 403, "message": "recorded by the differential oracle"}
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    def bind_of(self, user: str, key: str) -> str | None:
        with self._lock:
            return self.binds[user].get(key)

    def forget_volume_writes(self, user: str, claims: list[str]) -> None:
        """Before a pod is decided: an earlier pod's writes for the same claims are old."""
        with self._lock:
            for c in claims:
                self.volume_writes[user].pop(c, None)

    def volume_write_of(self, user: str, claims: list[str]) -> str | None:
        with self._lock:
            for c in claims:
                node = self.volume_writes[user].get(c)
                if node is not None:
                    return node
        return None

    def victims_of(self, user: str) -> list[str]:
        with self._lock:
            return list(self.deletes[user])

    def clear(self) -> None:
        with self._lock:
            self.binds.clear()
            self.deletes.clear()
            self.volume_writes.clear()

    # ---- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        local = self.cluster.local
        server = serve_admission(
            self._review, local.pki_dir, local.dir / "oracle-webhook", WEBHOOK_NAME
        )
        self._server = server
        port = server.server_address[1]
        ca = base64.b64encode((local.pki_dir / "ca.crt").read_bytes()).decode()

        def hook_for(
            name: str, operation: str, resource: str, scope: str = "Namespaced"
        ) -> dict[str, Any]:
            return {
                "name": f"{name}.oracle.kas.io",
                "clientConfig": {"url": f"https://127.0.0.1:{port}/review", "caBundle": ca},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": [operation],
                        "resources": [resource],
                        "scope": scope,
                    }
                ],
                # only the scenarios' namespaces: the rest of the cluster is left alone
                "namespaceSelector": {"matchLabels": {"oracle": "true"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }

        self.cluster.api(
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": WEBHOOK_NAME},
                "webhooks": [
                    hook_for("bind", "CREATE", "pods/binding"),
                    hook_for("delete", "DELETE", "pods"),
                    hook_for("victim", "UPDATE", "pods/status"),
                    hook_for("pvc", "UPDATE", "persistentvolumeclaims"),
                    # cluster-scoped: the namespaceSelector does not apply
                    hook_for("pv", "UPDATE", "persistentvolumes", "Cluster"),
                ],
            },
        )
        self._wait_active()

    def _wait_active(self) -> None:
        """The API server loads webhook configurations asynchronously: probe until it
        calls us (a DELETE of a throwaway pod in a labelled namespace)."""
        ns = "oracle-probe"
        self.cluster.admin.request(
            "POST",
            "/api/v1/namespaces",
            {"metadata": {"name": ns, "labels": {"oracle": "true"}}},
        )
        pod = {
            "metadata": {"name": "oracle-probe"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "schedulerName": "oracle-none"},
        }
        deadline = time.monotonic() + 60
        while not self.probe_seen.is_set():
            self.cluster.admin.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)
            self.cluster.admin.request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods/oracle-probe?gracePeriodSeconds=0"
            )
            if time.monotonic() > deadline:
                raise AssertionError("the API server never called the oracle's webhook")
            self.probe_seen.wait(0.2)

    def stop(self) -> None:
        self.cluster.admin.request(
            "DELETE",
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_NAME}",
        )
        if self._server is not None:
            self._server.shutdown()
            self._server = None


def _marks_victim(req: dict[str, Any]) -> bool:
    """The update gives the pod upstream's DisruptionTarget condition for preemption
    (PreemptionByScheduler), which the old object did not have."""

    def marked(obj: Any) -> bool:
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        return any(
            c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
            for c in conditions
        )

    return marked(req.get("object")) and not marked(req.get("oldObject"))


def _volume_write(obj: dict[str, Any], resource: str) -> tuple[str, str]:
    """(claim key, node) of a PreBind write: a PVC's selected-node annotation, or a PV's
    claimRef and the hostname its node affinity requires ("" when it names none)."""
    meta = obj.get("metadata") or {}
    if resource == "persistentvolumeclaims":
        node = (meta.get("annotations") or {}).get("volume.kubernetes.io/selected-node", "")
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}", str(node)
    spec = obj.get("spec") or {}
    ref = spec.get("claimRef") or {}
    node = ""
    terms = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    for term in terms or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == "kubernetes.io/hostname" and e.get("values"):
                node = str(e["values"][0])
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}", node
