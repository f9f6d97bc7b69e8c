"""GET /explain/{namespace}/{name} through aiohttp: per-node lists only on request and
paged (limit, continue; a bad token is a 400), 429 with Retry-After beyond the queue,
and the tenancy callable (403 before revealing the pod; other tenants' victims counted,
not named; one question per distinct namespace)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from scheduler.cache import Cache
from scheduler.explain import EXPLAIN_PATH, AttemptLog, EvaluationGate, Explainer, http_handler
from scheduler.explain.access import CanReadPods
from scheduler.explain.pages import encode_continue
from scheduler.model.pod import PodInfo
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.preemption.test_default_preemption import World, world

NODES = 12


def _cluster() -> tuple[World, dict[str, PodInfo]]:
    """12 nodes of 4 cpu, each full with 4 pods of 900m; node n0's victims live in the
    namespaces "team-b" and "team-c", the others in "default"; the preemptor "hi" in
    "team-a" needs 3 cpu."""
    w = world(nodes=0)
    cache: Cache = w.cache
    for i in range(NODES):
        cache.add_node(make_node(f"n{i:02}").capacity(cpu="4", pods="110").obj())
        for j in range(4):
            ns = ("team-b", "team-c")[j % 2] if i == 0 else "default"
            b = make_pod(f"v{i}-{j}", ns).priority(j + 1).requests(cpu="900m").node(f"n{i:02}")
            cache.add_pod(b.started("2024-01-01T00:00:00Z").obj())
    pods = {
        "team-a/hi": make_pod("hi", "team-a").priority(1000).requests(cpu="3").obj(),
        "team-a/small": make_pod("small", "team-a").requests(cpu="100m").obj(),
        "team-a/bound": make_pod("bound", "team-a").node("n01").obj(),
    }
    return w, pods


def _explainer(w: World, pods: dict[str, PodInfo], gate: EvaluationGate[Any]) -> Explainer:
    return Explainer(
        pod_lookup=pods.get,
        frameworks={"default-scheduler": w.framework},
        cache=w.cache,
        nominator=w.nominator,
        attempts=AttemptLog(),
        queue_of=lambda uid: "unschedulable",
        gate=gate,
    )


Client = TestClient[web.Request, web.Application]


async def _client(handler: Any) -> Client:
    app = web.Application()
    app.router.add_get(EXPLAIN_PATH, handler)
    client: Client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def plain() -> AsyncIterator[tuple[Client, Explainer]]:
    w, pods = _cluster()
    explainer = _explainer(w, pods, EvaluationGate(share=1.0))
    client = await _client(http_handler(explainer))
    yield client, explainer
    await client.close()


async def test_the_answer_has_no_node_lists_unless_asked(plain: tuple[Client, Explainer]) -> None:
    client, _ = plain
    r = await client.get("/explain/team-a/hi")
    assert r.status == 200
    body = await r.json()
    now = body["now"]
    assert now["result"] == "Unschedulable" and "nodes" not in now
    assert "metadata" not in body
    plan = now["preemption"]
    assert plan["node"] == "n00" and plan["victimCount"] == 3 and plan["hiddenVictims"] == 0
    assert sorted(v["pod"] for v in plan["victims"]) == [
        "team-b/v0-0",
        "team-b/v0-2",
        "team-c/v0-1",
    ]
    r = await client.get("/explain/team-a/small?nodes=true")
    now = (await r.json())["now"]
    assert now["result"] == "Schedulable" and now["node"].startswith("n")
    assert now["preemption"] is None and "nodes" not in now


async def test_pages_cover_every_node_once_and_a_bad_token_is_a_400(
    plain: tuple[Client, Explainer],
) -> None:
    client, explainer = plain
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        query = "nodes=true&limit=5" + (f"&continue={token}" if token else "")
        r = await client.get(f"/explain/team-a/hi?{query}")
        assert r.status == 200, await r.text()
        body = await r.json()
        names = [n["node"] for n in body["now"]["nodes"]]
        assert len(names) <= 5
        seen += names
        pages += 1
        token = body["metadata"]["continue"]
        assert body["metadata"]["remainingNodes"] == NODES - len(seen)
        if not token:
            break
    assert pages == 3 and seen == sorted(seen) == [f"n{i:02}" for i in range(NODES)]
    assert explainer.gate.evaluations == 1  # three pages, one evaluation
    bad = {
        "continue=%%%": 400,
        "nodes=true&continue=bm90IGpzb24": 400,  # "not json"
        "nodes=true&continue=" + encode_continue("another-uid", "n03"): 400,
        "nodes=true&limit=0": 400,
        "nodes=true&limit=ten": 400,
        "nodes=yes": 400,
        "limit=5": 400,
    }
    for query, code in bad.items():
        r = await client.get(f"/explain/team-a/hi?{query}")
        assert r.status == code, (query, await r.text())
        assert "error" in await r.json()
    r = await client.get("/explain/team-a/hi?nodes=true&continue=bm90IGpzb24")
    assert "invalid continue token" in (await r.json())["error"]


async def test_unknown_and_bound_pods(plain: tuple[Client, Explainer]) -> None:
    client, _ = plain
    r = await client.get("/explain/team-a/nobody")
    assert r.status == 404 and "not found" in (await r.json())["error"]
    r = await client.get("/explain/team-a/bound")
    assert r.status == 409 and "not pending" in (await r.json())["error"]


async def test_beyond_the_queue_the_answer_is_429_with_retry_after() -> None:
    w, pods = _cluster()
    for i in range(6):
        pods[f"team-a/p{i}"] = make_pod(f"p{i}", "team-a").requests(cpu="100m").obj()
    explainer = _explainer(w, pods, EvaluationGate(queue_size=2, share=1.0))
    release = asyncio.Event()
    real = explainer.runner.evaluate

    async def held(fwk: Any, pod: PodInfo, group: Any = None) -> Any:
        await release.wait()
        return await real(fwk, pod, group)

    explainer.runner.evaluate = held  # type: ignore[method-assign]
    client = await _client(http_handler(explainer))
    try:
        calls = [asyncio.create_task(client.get(f"/explain/team-a/p{i}")) for i in range(6)]
        # one running and two waiting hold on; the three beyond them are answered at once
        refused: set[asyncio.Task[Any]] = set()
        pending = set(calls)
        while len(refused) < 3:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            refused |= done
        assert explainer.gate.waiting == 2
        assert len(refused) == 3
        for c in refused:
            r = c.result()
            assert r.status == 429 and int(r.headers["Retry-After"]) >= 1
            assert "busy" in (await r.json())["error"]
        release.set()
        answered = [await c for c in calls if c not in refused]
        assert [r.status for r in answered] == [200, 200, 200]
        assert explainer.gate.evaluations == 3
    finally:
        await client.close()


class Access:
    """A fake `can_read_pods`: the namespaces the caller may read; counts questions."""

    def __init__(self, *readable: str) -> None:
        self.readable = set(readable)
        self.asked: list[str] = []

    async def __call__(self, request: web.Request, namespace: str) -> bool:
        self.asked.append(namespace)
        return namespace in self.readable


async def _with_access(access: CanReadPods) -> tuple[Client, Explainer]:
    w, pods = _cluster()
    explainer = _explainer(w, pods, EvaluationGate(share=1.0))
    return await _client(http_handler(explainer, can_read_pods=access)), explainer


async def test_a_caller_who_may_not_read_the_namespace_gets_403_whether_or_not_the_pod_exists() -> (
    None
):
    access = Access("team-b")
    client, explainer = await _with_access(access)
    try:
        for path in ("/explain/team-a/hi", "/explain/team-a/nobody"):
            r = await client.get(path)
            assert r.status == 403
            assert "team-a" in (await r.json())["error"]
        assert explainer.gate.evaluations == 0
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("readable", "named"),
    [
        (("team-a",), []),
        (("team-a", "team-b"), ["team-b/v0-0", "team-b/v0-2"]),
        (("team-a", "team-b", "team-c"), ["team-b/v0-0", "team-b/v0-2", "team-c/v0-1"]),
    ],
)
async def test_victims_elsewhere_are_counted_not_named(
    readable: tuple[str, ...], named: list[str]
) -> None:
    access = Access(*readable)
    client, _ = await _with_access(access)
    try:
        r = await client.get("/explain/team-a/hi")
        assert r.status == 200
        body = await r.json()
        plan = body["now"]["preemption"]
        assert sorted(v["pod"] for v in plan["victims"]) == named
        assert plan["victimCount"] == 3 and plan["hiddenVictims"] == 3 - len(named)
        text = await r.text()
        for hidden in {"team-b", "team-c"} - set(readable):
            assert hidden not in text
        # the URL's namespace once, then each victim namespace once
        assert access.asked == ["team-a", "team-b", "team-c"]
    finally:
        await client.close()
