"""Informer against the real apiserver: list+watch, and a forced 410 with a re-list
whose diff is exact."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest

from scheduler.client.backoff import Backoff
from scheduler.client.connection import Connection
from scheduler.client.informer import Informer, Resource
from scheduler.client.lean_json import list_page, watch_event
from tests.kube import ClusterHandle, pod_manifest

pytestmark = pytest.mark.cluster

Raw = dict[str, Any]


def summary(raw: Raw) -> tuple[str, str, str]:
    meta = raw["metadata"]
    return meta["name"], meta["resourceVersion"], (meta.get("labels") or {}).get("v", "")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_add(self, obj: tuple[str, str, str]) -> None:
        self.calls.append(("add", obj[0]))

    def on_update(self, old: tuple[str, str, str], new: tuple[str, str, str]) -> None:
        self.calls.append(("update", new[0]))

    def on_delete(self, obj: tuple[str, str, str]) -> None:
        self.calls.append(("delete", obj[0]))


async def until(predicate: Callable[[], bool], seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():  # noqa: ASYNC110 - polling handler records
            await asyncio.sleep(0.05)


@pytest.fixture
async def conn(cluster: ClusterHandle) -> AsyncIterator[Connection]:
    connection = await Connection.from_kubeconfig(cluster.kubeconfig)
    yield connection
    await connection.close()


def patch_label(cluster: ClusterHandle, ns: str, name: str, value: str) -> None:
    cluster.api(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{name}",
        {"metadata": {"labels": {"v": value}}},
        "application/merge-patch+json",
    )


def delete_pod(cluster: ClusterHandle, ns: str, name: str) -> None:
    cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})


@pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watch-list"])
async def test_list_and_watch_see_adds_updates_and_deletes(
    cluster: ClusterHandle, conn: Connection, watch_list: bool
) -> None:
    ns = cluster.create_namespace(f"inf-{uuid.uuid4().hex[:6]}")
    cluster.create_pod(ns, pod_manifest("before", scheduler_name="nobody"))
    handler = Recorder()
    informer = Informer(
        conn,
        Resource("", "v1", "pods", namespace=ns),
        summary,
        handler,
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
        page_size=1,
        watch_list=watch_list,
    )
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(20):
        await informer.wait_synced()
    assert handler.calls == [("add", "before")]
    assert informer.statistics().lists == 1
    # the API server served the watch list (v1.37: WatchList on); it did not fall back
    assert informer._watch_list is watch_list

    cluster.create_pod(ns, pod_manifest("after", scheduler_name="nobody"))
    await until(lambda: ("add", "after") in handler.calls)
    patch_label(cluster, ns, "before", "2")
    await until(lambda: ("update", "before") in handler.calls)
    assert informer.get(f"{ns}/before") is not None
    assert informer.get(f"{ns}/before")[2] == "2"  # type: ignore[index]
    delete_pod(cluster, ns, "after")
    await until(lambda: ("delete", "after") in handler.calls)
    assert [o[0] for o in informer.list()] == ["before"]
    informer.stop()
    await task


async def test_a_page_decoded_without_managed_fields_is_the_page_less_them(
    cluster: ClusterHandle, conn: Connection
) -> None:
    # the API server's own pages of pods and nodes: the lean decode gives exactly the
    # plain decode with each object's managedFields taken out, and there were some
    ns = cluster.create_namespace(f"lean-{uuid.uuid4().hex[:6]}")
    for i in range(3):
        cluster.create_pod(ns, pod_manifest(f"p{i}", scheduler_name="nobody"))
    patch_label(cluster, ns, "p1", "2")  # a second writer's managedFields entry
    for path in (f"/api/v1/namespaces/{ns}/pods", "/api/v1/nodes"):
        query = [("limit", "2")]
        plain = await conn.request("GET", path, query=query)
        lean = await conn.request("GET", path, query=query, decode=list_page)
        assert plain["items"], path
        assert all(item["metadata"].get("managedFields") for item in plain["items"]), path
        for item in plain["items"]:
            del item["metadata"]["managedFields"]
        # the continue token and resourceVersion differ between two LISTs; the objects not
        assert {k: v for k, v in lean.items() if k != "metadata"} == {
            k: v for k, v in plain.items() if k != "metadata"
        }
        assert set(lean["metadata"]) == set(plain["metadata"])

    # a watch from the same resourceVersion, read both ways: the same events, less
    # managedFields in the lean one
    start = (await conn.request("GET", f"/api/v1/namespaces/{ns}/pods"))["metadata"]
    query = [("resourceVersion", start["resourceVersion"])]
    path = f"/api/v1/namespaces/{ns}/pods"

    async def first_events(**kw: Any) -> list[Raw]:
        out: list[Raw] = []
        stream = conn.watch(path, query=query, timeout_seconds=5, **kw)
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                out.append(event)
                if len(out) == 2:
                    break
        return out

    patch_label(cluster, ns, "p2", "3")
    delete_pod(cluster, ns, "p0")
    async with asyncio.timeout(20):
        plain_events = await first_events()
        lean_events = await first_events(decode=watch_event)
    # the label patch, then the delete (a deletionTimestamp or the object gone)
    assert plain_events[0]["type"] == "MODIFIED"
    assert plain_events[1]["type"] in ("MODIFIED", "DELETED")
    assert all(e["object"]["metadata"].get("managedFields") for e in plain_events)
    for e in plain_events:
        del e["object"]["metadata"]["managedFields"]
    assert lean_events == plain_events


class GatedConnection:
    """The real connection, with watches that end every second and can be held at a
    gate; a held watch may be released with a rewritten (too old) resourceVersion."""

    def __init__(self, real: Connection) -> None:
        self.real = real
        self.gate = asyncio.Event()
        self.gate.set()
        self.held = asyncio.Event()
        self.rewrite_rv: str | None = None

    async def request(self, *args: Any, **kwargs: Any) -> Raw:
        return await self.real.request(*args, **kwargs)

    async def watch(
        self, path: str, *, query: Any = None, timeout_seconds: int = 300
    ) -> AsyncGenerator[Raw, None]:
        if not self.gate.is_set():
            self.held.set()
            await self.gate.wait()
        params = list(query)
        if self.rewrite_rv is not None:
            params = [(k, self.rewrite_rv if k == "resourceVersion" else v) for k, v in params]
            self.rewrite_rv = None
        stream = self.real.watch(path, query=params, timeout_seconds=1)
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                yield event


async def test_the_informer_survives_an_apiserver_restart_and_a_forced_410(
    make_cluster: Callable[..., ClusterHandle],
) -> None:
    # a private control plane: this test restarts its apiserver
    cluster = make_cluster(0)
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    ns = cluster.create_namespace("gone")
    for name in ("keep", "change", "vanish"):
        cluster.create_pod(ns, pod_manifest(name, scheduler_name="nobody"))
    gated = GatedConnection(conn)
    handler = Recorder()
    informer = Informer(
        gated,  # type: ignore[arg-type]
        Resource("", "v1", "pods", namespace=ns),
        summary,
        handler,
        backoff=Backoff(initial=0.2, maximum=1.0),
        name="gone-pods",
    )
    # the observers app.py feeds scheduler_informer_relists_total / _events_total with
    lists_seen: list[str] = []
    errors_seen: list[str] = []
    informer.on_list = lists_seen.append
    informer.on_event = lambda name, kind: errors_seen.append(name) if kind == "ERROR" else None
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(20):
        await informer.wait_synced()
    assert lists_seen == ["gone-pods"]
    assert sorted(handler.calls) == [("add", "change"), ("add", "keep"), ("add", "vanish")]
    handler.calls.clear()

    # 1. the apiserver goes away (connection refused) and comes back: watching goes on
    await asyncio.to_thread(cluster.local.stop_component, "kube-apiserver")
    await asyncio.sleep(1.5)
    await asyncio.to_thread(cluster.local.start_component, "kube-apiserver")
    assert informer.statistics().errors >= 1
    cluster.create_pod(ns, pod_manifest("after-restart", scheduler_name="nobody"))
    await until(lambda: ("add", "after-restart") in handler.calls, 30)
    handler.calls.clear()

    # 2. changes the informer cannot see, then a watch from a resourceVersion older than
    # the (restarted) watch cache: the apiserver answers 410 and the informer re-lists
    lists_before = informer.statistics().lists
    gated.gate.clear()
    async with asyncio.timeout(10):
        await gated.held.wait()
    patch_label(cluster, ns, "change", "2")
    delete_pod(cluster, ns, "vanish")
    cluster.create_pod(ns, pod_manifest("new", scheduler_name="nobody"))
    gated.rewrite_rv = "1"
    gated.gate.set()

    await until(lambda: informer.statistics().lists > lists_before)
    assert informer.statistics().gone >= 1
    # the re-list was reported; the 410 came as the apiserver's ERROR event
    assert lists_seen == ["gone-pods"] * informer.statistics().lists
    assert len(lists_seen) >= 2
    assert errors_seen, "the 410 arrives as an ERROR watch event"
    assert sorted(handler.calls) == [("add", "new"), ("delete", "vanish"), ("update", "change")]
    assert sorted(o[0] for o in informer.list()) == ["after-restart", "change", "keep", "new"]
    # and it watches on from the new list
    patch_label(cluster, ns, "keep", "3")
    await until(lambda: ("update", "keep") in handler.calls)
    informer.stop()
    await task
    await conn.close()
