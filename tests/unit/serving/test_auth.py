"""scheduler.server's delegated authentication and authorization on a real TLS socket,
against an in-memory API server (tests/serving_helpers.FakeApi): who gets 401, 403, 200;
what is reviewed and how often (the caches); the front proxy's headers."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from scheduler.serving.aggregated import EXPLAIN_API_PATH
from tests.unit.helpers.serving import Served, make_served

TENANT = {"username": "system:serviceaccount:team-a:reader", "uid": "u-1",
          "groups": ["system:serviceaccounts", "system:authenticated"]}  # fmt: skip


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    s = make_served(tmp_path)
    s.api.tokens = {"tenant": TENANT, "nobody": {"username": "nobody", "groups": []}}
    s.api.allowed = {(TENANT["username"], "pods/team-a"), (TENANT["username"], "/metrics")}

    async def explain(request: web.Request) -> web.StreamResponse:
        ns = request.match_info["namespace"]
        if not await s.server.can_read_pods(request, ns):
            return web.json_response({"error": "forbidden"}, status=403)
        return web.json_response({"pod": f"{ns}/{request.match_info['name']}"})

    s.server.add_get("/explain/{namespace}/{name}", explain, authorizes_itself=True)
    s.server.add_explain(explain)
    await s.server.start()
    yield s
    await s.server.stop()


async def test_anonymous_is_refused_outside_the_always_allowed_paths(served: Served) -> None:
    for path in ("/metrics", "/explain/team-a/p", "/apis", "/no-such-path"):
        status, body = await served.get(path)
        assert status == 401, path
        assert json.loads(body)["reason"] == "Unauthorized"
    assert (await served.get("/healthz"))[0] == 200
    assert served.api.reviews == []  # anonymous costs no review


async def test_an_invalid_token_is_401_even_on_healthz(served: Served) -> None:
    # upstream's union authenticator fails on error before anonymous is tried
    assert (await served.get("/healthz", token="forged"))[0] == 401


async def test_a_token_without_the_right_is_forbidden_with_upstreams_message(
    served: Served,
) -> None:
    status, body = await served.get("/metrics", token="nobody")
    assert status == 403
    answer = json.loads(body)
    assert answer["reason"] == "Forbidden"
    assert answer["message"] == 'forbidden: User "nobody" cannot get path "/metrics"'


async def test_a_token_with_the_right_reads_metrics_and_answers_are_cached(served: Served) -> None:
    for _ in range(3):
        assert (await served.get("/metrics", token="tenant"))[0] == 200
    kinds = [r["kind"] for r in served.api.reviews]
    assert kinds == ["TokenReview", "SubjectAccessReview"]  # then both from the caches
    sar = served.api.reviews[1]["spec"]
    assert sar["user"] == TENANT["username"] and sar["uid"] == "u-1"
    assert sar["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}


async def test_system_masters_client_certificate_needs_no_review(served: Served) -> None:
    assert (await served.get("/metrics", client=served.admin))[0] == 200
    assert served.api.reviews == []


async def test_a_client_certificate_user_is_reviewed_with_its_cn_and_groups(
    served: Served,
) -> None:
    alice = served.user_cert("alice", ["devs"])
    assert (await served.get("/metrics", client=alice))[0] == 403
    spec = served.api.reviews[-1]["spec"]
    assert spec["user"] == "alice" and spec["groups"] == ["devs", "system:authenticated"]


async def test_tenant_explain_allowed_in_its_namespace_only(served: Served) -> None:
    assert (await served.get("/explain/team-a/p", token="tenant"))[0] == 200
    assert (await served.get("/explain/team-b/p", token="tenant"))[0] == 403
    pods = [r["spec"]["resourceAttributes"] for r in served.api.reviews
            if "resourceAttributes" in r["spec"]]  # fmt: skip
    assert {"verb": "get", "group": "", "resource": "pods", "version": "v1",
            "namespace": "team-b"} in pods  # fmt: skip


async def test_the_front_proxy_forwards_the_user_in_headers(served: Served) -> None:
    path = EXPLAIN_API_PATH.format(namespace="team-a", name="p")
    served.api.allowed.add((TENANT["username"], "pods/team-a"))
    headers = {"X-Remote-User": TENANT["username"], "X-Remote-Group": "system:serviceaccounts",
               "X-Remote-Extra-Authentication.kubernetes.io%2fpod-name": "x"}  # fmt: skip
    status, body = await served.get(path, client=served.front_proxy, headers=headers)
    assert status == 200, body
    reviewed = served.api.reviews[-1]["spec"]
    assert reviewed["user"] == TENANT["username"]
    assert reviewed["extra"] == {"authentication.kubernetes.io/pod-name": ["x"]}
    assert "system:authenticated" in reviewed["groups"]
    # the same headers from a client the front proxy CA did not sign are not believed:
    # the admin's certificate names the admin, whatever the headers say
    alice = served.user_cert("alice", [])
    assert (await served.get(path, client=alice, headers=headers))[0] == 403
    assert served.api.reviews[-1]["spec"]["user"] == "alice"


async def test_the_front_proxy_without_a_user_header_is_not_a_client(served: Served) -> None:
    assert (await served.get("/metrics", client=served.front_proxy))[0] == 401


async def test_discovery_documents_for_the_aggregator(served: Served) -> None:
    status, body = await served.get("/apis/explain.kas.io/v1alpha1", client=served.admin)
    assert status == 200
    resources = json.loads(body)
    assert resources["kind"] == "APIResourceList"
    assert resources["resources"][0]["name"] == "pods"
    assert resources["resources"][0]["verbs"] == ["get"]


async def test_an_unanswered_review_is_an_error_never_an_allow(served: Served) -> None:
    served.api.fail = True
    assert (await served.get("/metrics", token="tenant"))[0] == 401  # TokenReview failed
    served.api.fail = False
    assert (await served.get("/metrics", token="nobody"))[0] == 403
    served.api.fail = True
    served.server.authorizer._answers = type(served.server.authorizer._answers)(10)
    assert (await served.get("/metrics", client=served.user_cert("bob", [])))[0] == 500


async def test_a_certificate_from_an_unknown_ca_is_refused_at_the_handshake(
    served: Served, tmp_path: Path
) -> None:
    from kas_dev.cluster.pki import make_pki
    from kas_dev.cluster.scheduler_https import ClientCert

    other = make_pki(tmp_path / "other")
    with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
        await served.get("/healthz", client=ClientCert(other.admin_cert, other.admin_key))
