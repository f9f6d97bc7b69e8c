"""The DELETE webhook harness itself works against the real API server: it sees, delays,
refuses and counts pod DELETEs. The preemption tests rely on it."""

from __future__ import annotations

import time

import pytest

from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import wait_running
from tests.webhook import DeleteWebhook

pytestmark = pytest.mark.cluster


def test_the_webhook_delays_refuses_and_counts_pod_deletes(cluster: ClusterHandle) -> None:
    ns = cluster.create_namespace("webhook-harness")
    hook = DeleteWebhook(cluster, ns)
    hook.start()
    try:
        for name in ("slow", "refused"):
            cluster.create_pod(
                ns, pod_manifest(name, scheduler_name="nobody", nodeName="kwok-node-3")
            )
        # kwok's status writes done: a write to the pod while its DELETE is at the webhook
        # (or just before, not yet in the API server's watch cache) makes the API server
        # run admission again for the same request, refused or allowed (etcd3
        # store.GuaranteedUpdate retries from etcd's state when it started from a stale
        # copy): with another client patching, 200 refused DELETEs made 249 webhook calls
        wait_running(cluster, ns, ["slow", "refused"])
        hook.delay = 1.5
        t0 = time.monotonic()
        cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/slow")
        assert time.monotonic() - t0 >= 1.4
        hook.delay = 0
        hook.refuse = {"refused"}
        status, body = cluster.admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/refused")
        assert status == 403 and "refused by the test webhook" in body["message"]
        assert cluster.get_pod(ns, "refused") is not None
        # one request, refused once: nothing else writes the pod now
        assert hook.deletes["refused"] == 1 and hook.refused == {"refused": 1}
        # one DELETE of "slow" was sent; the API server may run admission a second time
        # for one graceful delete (seen by the fault suite's soak, which therefore counts
        # victims' DELETEs from the audit log), so the webhook may see it once or twice
        assert 1 <= hook.deletes["slow"] <= 2, hook.deletes
        wait_for(lambda: cluster.get_pod(ns, "slow") is None, timeout=10, what="slow pod gone")
    finally:
        hook.stop()
    # once stopped, deletes go through again
    cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/refused")
