"""A real validating admission webhook for pod DELETEs, run by the tests.

The API server calls it for every pod DELETE in the namespaces it watches: it can delay
the answer (to make preemption's API calls slow at the server itself), refuse the delete,
and it counts every call per pod. Calls are not requests: kube-apiserver may call it twice
for one graceful DELETE (its update retried from etcd when the watch cache's copy was
stale) and not at all for a DELETE of a pod already terminating, so "exactly one DELETE
per victim" is counted from the audit log (tests/faults/audit.py), by the client's identity.
A dry-run DELETE (`dryRun=All`: the scheduler's preflight of an all-members PodGroup) is
delayed and refused like any other but counted apart (`dry_runs`, `dry_run_refused`): it
deletes nothing. It serves HTTPS with a certificate signed by the local cluster's CA, on 127.0.0.1.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.identity import write_pem_pair
from tests.kube import ClusterHandle

KWOK_USER = "system:kwok"


def _serving_cert(pki: Path, out: Path) -> tuple[Path, Path]:
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "delete-webhook")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    cert_path, key_path = write_pem_pair(out, "webhook", cert, key)
    return cert_path, key_path


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # the API server drops idle webhook connections; a broken TLS stream is not news
        pass


def serve_admission(
    review: Callable[[dict[str, Any]], dict[str, Any]], pki: Path, cert_dir: Path, name: str
) -> ThreadingHTTPServer:
    """An HTTPS admission webhook on 127.0.0.1 (a free port, `server.server_address[1]`),
    its certificate signed by the cluster CA; `review` maps an AdmissionReview request to
    the response review. Serves from a daemon thread until `server.shutdown()`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            out = json.dumps(review(json.loads(self.rfile.read(length)))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    cert, key = _serving_cert(pki, cert_dir)
    server = _QuietServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


class DeleteWebhook:
    """Delays or refuses pod DELETEs in one namespace and counts them per pod name."""

    def __init__(
        self, cluster: ClusterHandle, namespace: str, name: str = "delete-webhook"
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = f"{name}-{namespace}"
        self.delay = 0.0
        self.refuse: set[str] = set()  # pod names whose DELETE is refused
        self.refuse_all = False
        # DELETEs the server asked about, by pod name; kwok's own final DELETE of a
        # terminating pod (what a kubelet does) is counted apart, in kubelet_deletes
        self.deletes: Counter[str] = Counter()
        self.kubelet_deletes: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        # dry-run DELETEs (nothing deleted, whatever the answer), by pod name
        self.dry_runs: Counter[str] = Counter()
        self.dry_run_refused: Counter[str] = Counter()
        self.in_flight = 0
        self.log: list[tuple[float, str, str]] = []  # (monotonic time, pod, "start"|"end")
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        pod = req.get("name", "")
        user = req.get("userInfo", {}).get("username", "")
        with self._lock:
            if user == KWOK_USER:
                self.kubelet_deletes[pod] += 1
                return {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": req["uid"], "allowed": True},
                }
            dry_run = bool(req.get("dryRun"))
            delay = self.delay
            refuse = self.refuse_all or pod in self.refuse
            if dry_run:
                self.dry_runs[pod] += 1
            else:
                self.deletes[pod] += 1
                self.in_flight += 1
                self.log.append((time.monotonic(), pod, "start"))
        try:
            if delay:
                time.sleep(delay)
        finally:
            with self._lock:
                if dry_run:
                    if refuse:
                        self.dry_run_refused[pod] += 1
                else:
                    self.in_flight -= 1
                    self.log.append((time.monotonic(), pod, "end"))
                    if refuse:
                        self.refused[pod] += 1
        response: dict[str, Any] = {"uid": req["uid"], "allowed": not refuse}
        if refuse:
            response["status"] = {"code": 403, "message": "delete refused by the test webhook"}
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    def start(self) -> None:
        pki = self.cluster.local.pki_dir
        server = serve_admission(
            self._review, pki, self.cluster.local.dir / "webhook" / self.namespace, self.name
        )
        self._server = server
        port = server.server_address[1]
        ca = (pki / "ca.crt").read_bytes()
        import base64

        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [
                {
                    "name": "pod-delete.tests.kube-async-scheduler.io",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate",
                        "caBundle": base64.b64encode(ca).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": [self.operation],
                            "resources": [self.resource],
                            "scope": "Namespaced",
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 30,
                }
            ],
        }
        self.cluster.api(
            "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", config
        )
        # the API server picks up new webhook configurations asynchronously: probe with a
        # throwaway pod until the webhook hears of it
        deadline = time.monotonic() + 30
        while True:
            self._probe_once()
            if self.deletes["webhook-probe"]:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the API server never called the {self.operation} webhook")
            time.sleep(0.2)
        with self._lock:
            del self.deletes["webhook-probe"]
            self.log = [e for e in self.log if e[1] != "webhook-probe"]

    operation = "DELETE"
    resource = "pods"

    def _probe_once(self) -> None:
        probe = {
            "metadata": {"name": "webhook-probe"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "none"},
        }
        self.cluster.admin.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", probe)
        self.cluster.admin.request(
            "DELETE",
            f"/api/v1/namespaces/{self.namespace}/pods/webhook-probe?gracePeriodSeconds=0",
        )

    def stop(self) -> None:
        self.cluster.admin.request(
            "DELETE",
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{self.name}",
        )
        if self._server is not None:
            self._server.shutdown()
            self._server = None


class BindingWebhook(DeleteWebhook):
    """The same harness on pods/binding CREATE: delays or refuses binds (counted per pod in
    `deletes`, whatever the name says). Binds made with kwok's identity pass untouched, so
    a test can play "another binder" that is not slowed down."""

    operation = "CREATE"
    resource = "pods/binding"

    def _probe_once(self) -> None:
        probe = {
            "metadata": {"name": "webhook-probe"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        self.cluster.admin.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", probe)
        binding = {
            "metadata": {"name": "webhook-probe"},
            "target": {"kind": "Node", "name": "none"},
        }
        self.cluster.admin.request(
            "POST", f"/api/v1/namespaces/{self.namespace}/pods/webhook-probe/binding", binding
        )
        self.cluster.admin.request(
            "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/webhook-probe?gracePeriodSeconds=0"
        )
