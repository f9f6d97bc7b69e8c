"""scheduler.client.informer: LIST+WATCH, 410 re-list diff, backoff, lifecycle.

A scripted fake connection stands in for the apiserver; the real one is in
tests/integration/test_client_informer.py.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.client.backoff import Backoff
from scheduler.client.errors import ConnectionFailed, Gone, Invalid, ServerError
from scheduler.client.informer import (
    PODS,
    Informer,
    InformerState,
    InformerStateError,
    InformerStopped,
    Resource,
)

Raw = dict[str, Any]
END = object()


def pod(name: str, rv: str, *, ns: str = "default", bad: bool = False, **labels: str) -> Raw:
    raw: Raw = {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}}
    if labels:
        raw["metadata"]["labels"] = labels
    if bad:
        raw["bad"] = True
    return raw


def page(*items: Raw, rv: str = "100", cont: str = "") -> Raw:
    meta: Raw = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"kind": "PodList", "metadata": meta, "items": list(items)}


def ev(kind: str, obj: Raw) -> Raw:
    return {"type": kind, "object": obj}


def gone_event() -> Raw:
    return ev("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "old"})


class FakeConnection:
    """LIST answers and WATCH scripts, consumed in order. A watch with no script left
    blocks until the informer is stopped."""

    def __init__(self) -> None:
        self.lists: deque[Raw | Exception] = deque()
        self.watches: deque[list[object]] = deque()
        self.list_queries: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []

    async def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> Raw:
        assert (method, path) == ("GET", "/api/v1/pods")
        self.list_queries.append(dict(query))
        answer = self.lists.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(
        self, path: str, *, query: Any = None, timeout_seconds: int = 300
    ) -> AsyncGenerator[Raw, None]:
        self.watch_queries.append(dict(query))
        if not self.watches:
            await asyncio.Event().wait()
        for item in self.watches.popleft():
            if item is END:
                return
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, dict)
            yield item
        await asyncio.Event().wait()


@dataclass(frozen=True)
class Rec:
    key: str
    rv: str
    labels: tuple[tuple[str, str], ...]


def to_rec(raw: Raw) -> Rec:
    if raw.get("bad"):
        raise ValueError("malformed")
    meta = raw["metadata"]
    return Rec(
        f"{meta['namespace']}/{meta['name']}",
        meta["resourceVersion"],
        tuple(sorted((meta.get("labels") or {}).items())),
    )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_add(self, obj: Rec) -> None:
        self.calls.append(("add", obj.key, obj.rv))

    def on_update(self, old: Rec, new: Rec) -> None:
        self.calls.append(("update", new.key, old.rv, new.rv))

    def on_delete(self, obj: Rec) -> None:
        self.calls.append(("delete", obj.key))


class Harness:
    def __init__(self, **kwargs: Any) -> None:
        self.conn = FakeConnection()
        self.handler = Recorder()
        self.delays: list[float] = []
        self.transform_errors: list[tuple[Raw, Exception]] = []

        async def sleep(delay: float) -> None:
            self.delays.append(delay)
            await asyncio.sleep(0)

        self.informer: Informer[Rec] = Informer(
            self.conn,  # type: ignore[arg-type]
            PODS,
            to_rec,
            self.handler,
            sleep=sleep,
            backoff=Backoff(initial=1.0, maximum=8.0, jitter=0.0),
            on_transform_error=lambda raw, exc: self.transform_errors.append((raw, exc)),
            **kwargs,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.informer.run())

    async def until(self, predicate: Callable[[], bool], spins: int = 500) -> None:
        for _ in range(spins):
            if predicate():
                return
            await asyncio.sleep(0)
        raise AssertionError(f"condition not reached; calls={self.handler.calls}")

    async def stop(self) -> None:
        self.informer.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 1)


async def test_list_then_watch_emits_adds_updates_and_deletes() -> None:
    h = Harness(field_selector="status.phase!=Succeeded", page_size=2)
    h.conn.lists.append(page(pod("a", "1"), pod("b", "2"), rv="10", cont="tok"))
    h.conn.lists.append(page(pod("c", "3"), rv="11"))
    h.conn.watches.append(
        [
            ev("ADDED", pod("d", "12")),
            ev("MODIFIED", pod("a", "13", app="x")),
            ev("DELETED", pod("b", "14")),
            ev("BOOKMARK", {"metadata": {"resourceVersion": "20"}}),
        ]
    )
    h.start()
    await h.informer.wait_synced()
    await h.until(lambda: h.informer.resource_version == "20")
    assert h.handler.calls == [
        ("add", "default/a", "1"),
        ("add", "default/b", "2"),
        ("add", "default/c", "3"),
        ("add", "default/d", "12"),
        ("update", "default/a", "1", "13"),
        ("delete", "default/b"),
    ]
    assert sorted(r.key for r in h.informer.list()) == ["default/a", "default/c", "default/d"]
    assert h.informer.get("default/a") == Rec("default/a", "13", (("app", "x"),))
    assert h.conn.list_queries == [
        {"fieldSelector": "status.phase!=Succeeded", "limit": "2"},
        {"fieldSelector": "status.phase!=Succeeded", "limit": "2", "continue": "tok"},
    ]
    assert h.conn.watch_queries[0] == {
        "fieldSelector": "status.phase!=Succeeded",
        "resourceVersion": "11",
        "allowWatchBookmarks": "true",
    }
    await h.stop()
    assert h.informer.state is InformerState.STOPPED


async def test_a_gone_error_event_relists_and_emits_only_the_differences() -> None:
    h = Harness()
    h.conn.lists.append(page(pod("keep", "1"), pod("change", "2"), pod("vanish", "3"), rv="5"))
    h.conn.watches.append([gone_event()])
    h.conn.lists.append(page(pod("keep", "1"), pod("change", "7"), pod("new", "8"), rv="9"))
    h.start()
    await h.until(lambda: h.informer.statistics().lists == 2)
    assert h.handler.calls[3:] == [
        ("update", "default/change", "2", "7"),
        ("add", "default/new", "8"),
        ("delete", "default/vanish"),
    ]
    await h.until(lambda: len(h.conn.watch_queries) == 2)
    assert h.conn.watch_queries[1]["resourceVersion"] == "9"
    assert h.delays == []  # a 410 re-lists at once
    await h.stop()


async def test_objects_already_stored_are_read_with_their_current_record() -> None:
    # the update transform gets the record the store holds for the key: on a watch
    # update, on a re-list difference and for the final state of a delete; a new key
    # (or one whose old record is gone) goes through the plain transform
    seen: list[tuple[str, str, str]] = []

    def update(raw: Raw, old: Rec) -> Rec:
        new = to_rec(raw)
        seen.append((new.key, old.rv, new.rv))
        return new

    h = Harness(update_transform=update)
    h.conn.lists.append(page(pod("a", "1"), pod("b", "2"), rv="5"))
    h.conn.watches.append(
        [
            ev("MODIFIED", pod("a", "6")),
            ev("ADDED", pod("c", "7")),
            ev("DELETED", pod("b", "8")),
            ev("MODIFIED", pod("b", "9")),  # after its delete: read as new
            gone_event(),
        ]
    )
    h.conn.lists.append(page(pod("a", "10"), pod("b", "9"), pod("c", "7"), rv="11"))
    h.start()
    await h.until(lambda: h.informer.statistics().lists == 2)
    assert seen == [
        ("default/a", "1", "6"),
        ("default/b", "2", "8"),
        ("default/a", "6", "10"),
    ]
    assert h.handler.calls[2:] == [
        ("update", "default/a", "1", "6"),
        ("add", "default/c", "7"),
        ("delete", "default/b"),
        ("add", "default/b", "9"),
        ("update", "default/a", "6", "10"),
    ]
    assert h.informer.get("default/a") == Rec("default/a", "10", ())
    await h.stop()


async def test_observers_see_every_list_and_every_watch_event_by_type() -> None:
    h = Harness()
    lists: list[str] = []
    events: list[tuple[str, str]] = []
    h.informer.on_list = lists.append
    h.informer.on_event = lambda name, kind: events.append((name, kind))
    h.conn.lists.append(page(pod("a", "1"), rv="5"))
    h.conn.watches.append(
        [
            ev("ADDED", pod("b", "6")),
            ev("BOOKMARK", {"metadata": {"resourceVersion": "7"}}),
            ev("SURPRISE", pod("c", "8")),
            gone_event(),
        ]
    )
    h.conn.lists.append(page(pod("a", "1"), rv="9"))
    h.start()
    await h.until(lambda: h.informer.statistics().lists == 2)
    # the first LIST and the re-list after the 410
    assert lists == ["pods", "pods"]
    assert events == [
        ("pods", "ADDED"),
        ("pods", "BOOKMARK"),
        ("pods", "unknown"),
        ("pods", "ERROR"),
    ]
    await h.stop()


async def test_a_410_status_when_opening_the_watch_also_relists() -> None:
    h = Harness()
    h.conn.lists.append(page(pod("a", "1"), rv="5"))
    h.conn.watches.append([Gone(410, "Expired", "too old resource version")])
    h.conn.lists.append(page(rv="6"))
    h.start()
    await h.until(lambda: ("delete", "default/a") in h.handler.calls)
    assert h.informer.statistics().gone == 1
    await h.stop()


async def test_stream_errors_reconnect_from_the_last_version_with_growing_backoff() -> None:
    h = Harness()
    h.conn.lists.append(page(rv="5"))
    h.conn.watches.append([ConnectionFailed("refused")])
    h.conn.watches.append([ServerError(503, "ServiceUnavailable")])
    h.conn.watches.append([ev("ADDED", pod("a", "6")), ConnectionFailed("body cut")])
    h.conn.watches.append([END])
    h.start()
    await h.until(lambda: len(h.conn.watch_queries) == 5)
    assert [q["resourceVersion"] for q in h.conn.watch_queries] == ["5", "5", "5", "6", "6"]
    # refused, 503 -> 1, 2; an event arrived, so the next failure starts over at 1;
    # the clean END re-watches at once.
    assert h.delays == [1.0, 2.0, 1.0]
    assert h.informer.statistics().lists == 1
    await h.stop()


async def test_relist_after_error_lists_afresh_after_any_failure_and_reports_it() -> None:
    h = Harness(relist_after_error=True)
    errors: list[str] = []
    lists: list[str] = []
    h.informer.on_error = lambda name, exc: errors.append(type(exc).__name__)
    h.informer.on_list = lambda name: lists.append(str(len(h.informer.store)))
    h.conn.lists.append(page(pod("a", "1"), rv="5"))
    h.conn.lists.append(page(pod("a", "1"), pod("b", "7"), rv="8"))
    h.conn.watches.append([ServerError(503, "ServiceUnavailable")])
    h.conn.watches.append([END])
    h.start()
    await h.until(lambda: len(h.conn.watch_queries) == 3)
    # the 503 is followed by a LIST, not a watch from "5"; the clean END is not a failure
    assert [q["resourceVersion"] for q in h.conn.watch_queries] == ["5", "8", "8"]
    assert errors == ["ServerError"] and h.informer.statistics().lists == 2
    assert lists == ["1", "2"]  # on_list once the listing's handlers have run
    assert h.handler.calls[-1] == ("add", "default/b", "7")
    await h.stop()


async def test_a_failing_list_is_retried_and_sync_waits_for_it() -> None:
    h = Harness()
    h.conn.lists.append(ConnectionFailed("refused"))
    h.conn.lists.append(page(pod("a", "1"), rv="2"))
    h.start()
    await asyncio.wait_for(h.informer.wait_synced(), 1)
    assert h.delays == [1.0]
    assert h.informer.has_synced
    await h.stop()


async def test_an_expired_continue_token_restarts_the_list_from_scratch() -> None:
    h = Harness(page_size=1)
    h.conn.lists.append(page(pod("a", "1"), rv="2", cont="t1"))
    h.conn.lists.append(Gone(410, "Expired", "continue expired"))
    h.conn.lists.append(page(pod("a", "1"), rv="3", cont="t2"))
    h.conn.lists.append(page(pod("b", "2"), rv="3"))
    h.start()
    await h.informer.wait_synced()
    assert [q.get("continue") for q in h.conn.list_queries] == [None, "t1", None, "t2"]
    assert h.handler.calls == [("add", "default/a", "1"), ("add", "default/b", "2")]
    await h.stop()


async def test_each_list_page_is_read_into_records_while_only_the_next_is_fetched() -> None:
    # the raw objects of a page are dropped once read: transform runs for a page's
    # objects once the next page (and no later one) has been asked for, and the
    # handlers still see the whole LIST only once it is complete
    conn = FakeConnection()
    handler = Recorder()
    pages_fetched_at_transform: list[tuple[str, int, int]] = []

    def transform(raw: Raw) -> Rec:
        pages_fetched_at_transform.append(
            (raw["metadata"]["name"], len(conn.list_queries), len(handler.calls))
        )
        return to_rec(raw)

    informer: Informer[Rec] = Informer(
        conn,  # type: ignore[arg-type]
        PODS,
        transform,
        handler,
        page_size=2,
    )
    conn.lists.append(page(pod("a", "1"), pod("b", "2"), rv="5", cont="t1"))
    conn.lists.append(page(pod("c", "3"), pod("d", "4"), rv="5", cont="t2"))
    conn.lists.append(page(pod("e", "5"), rv="5"))
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    assert pages_fetched_at_transform == [
        ("a", 2, 0),
        ("b", 2, 0),
        ("c", 3, 0),
        ("d", 3, 0),
        ("e", 3, 0),
    ]
    assert [q.get("continue") for q in conn.list_queries] == [None, "t1", "t2"]
    assert handler.calls == [
        ("add", "default/a", "1"),
        ("add", "default/b", "2"),
        ("add", "default/c", "3"),
        ("add", "default/d", "4"),
        ("add", "default/e", "5"),
    ]
    informer.stop()
    await asyncio.wait_for(task, 1)


async def test_a_malformed_object_calls_the_hook_and_the_informer_goes_on() -> None:
    h = Harness()
    h.conn.lists.append(page(pod("bad", "1", bad=True), pod("good", "2"), rv="3"))
    h.conn.watches.append(
        [
            ev("MODIFIED", pod("good", "4", bad=True)),
            ev("ADDED", pod("next", "5")),
        ]
    )
    h.start()
    await h.until(lambda: ("add", "default/next", "5") in h.handler.calls)
    assert h.handler.calls == [("add", "default/good", "2"), ("add", "default/next", "5")]
    assert [raw["metadata"]["name"] for raw, _ in h.transform_errors] == ["bad", "good"]
    assert h.informer.get("default/good") == Rec("default/good", "2", ())
    assert h.informer.statistics().transform_errors == 2
    await h.stop()


async def test_a_malformed_object_in_a_relist_is_not_taken_for_deleted() -> None:
    h = Harness()
    h.conn.lists.append(page(pod("a", "1"), rv="2"))
    h.conn.watches.append([gone_event()])
    h.conn.lists.append(page(pod("a", "3", bad=True), rv="4"))
    h.start()
    await h.until(lambda: h.informer.statistics().lists == 2)
    assert h.handler.calls == [("add", "default/a", "1")]
    assert "default/a" in h.informer.store
    await h.stop()


async def test_a_raising_handler_is_logged_and_later_events_still_arrive() -> None:
    h = Harness()
    seen: list[str] = []

    def explode(obj: Rec) -> None:
        seen.append(obj.key)
        raise RuntimeError("handler bug")

    h.handler.on_add = explode  # type: ignore[method-assign]
    h.conn.lists.append(page(pod("a", "1"), pod("b", "2"), rv="3"))
    h.start()
    await h.informer.wait_synced()
    assert seen == ["default/a", "default/b"]
    assert h.informer.statistics().handler_errors == 2
    await h.stop()


async def test_a_delete_for_an_unknown_key_is_ignored() -> None:
    h = Harness()
    h.conn.lists.append(page(rv="1"))
    h.conn.watches.append([ev("DELETED", pod("ghost", "2")), ev("ADDED", pod("a", "3"))])
    h.start()
    await h.until(lambda: len(h.handler.calls) == 1)
    assert h.handler.calls == [("add", "default/a", "3")]
    await h.stop()


async def test_running_twice_or_after_stop_is_refused() -> None:
    h = Harness()
    h.conn.lists.append(page(rv="1"))
    h.start()
    await h.informer.wait_synced()
    with pytest.raises(InformerStateError):
        await h.informer.run()
    await h.stop()
    with pytest.raises(InformerStateError):
        await h.informer.run()
    h.informer.stop()  # idempotent


async def test_wait_synced_raises_when_the_informer_stops_before_syncing() -> None:
    h = Harness()
    h.conn.lists.append(ConnectionFailed("refused"))
    h.conn.lists.append(ConnectionFailed("refused"))
    h.conn.lists.append(ConnectionFailed("refused"))
    h.start()
    waiter = asyncio.create_task(h.informer.wait_synced())
    await h.until(lambda: len(h.delays) >= 2)
    await h.stop()
    with pytest.raises(InformerStopped):
        await waiter


async def test_an_unstarted_informer_can_be_stopped() -> None:
    h = Harness()
    h.informer.stop()
    assert h.informer.state is InformerState.STOPPED
    with pytest.raises(InformerStopped):
        await h.informer.wait_synced()


async def test_cancelling_run_propagates_the_cancellation() -> None:
    h = Harness()
    h.conn.lists.append(page(rv="1"))
    h.start()
    await h.informer.wait_synced()
    assert h.task is not None
    h.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await h.task
    assert h.informer.state is InformerState.STOPPED


@pytest.mark.parametrize(
    ("resource", "path"),
    [
        (Resource("", "v1", "pods"), "/api/v1/pods"),
        (Resource("", "v1", "pods", namespace="ns1"), "/api/v1/namespaces/ns1/pods"),
        (
            Resource("coordination.k8s.io", "v1", "leases", "kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        ),
        (
            Resource("scheduling.k8s.io", "v1", "priorityclasses"),
            "/apis/scheduling.k8s.io/v1/priorityclasses",
        ),
    ],
)
def test_resource_paths(resource: Resource, path: str) -> None:
    assert resource.path == path


# ---- watch list (sendInitialEvents) ---------------------------------------------------
def initial_end(rv: str) -> Raw:
    meta = {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}
    return ev("BOOKMARK", {"kind": "Pod", "metadata": meta})


async def test_a_watch_list_fills_the_store_at_its_end_bookmark_then_goes_on_as_the_watch() -> None:
    h = Harness(field_selector="status.phase!=Succeeded", watch_list=True)
    seen_at_second_add: list[list[tuple[str, ...]]] = []
    original = h.informer._read_page

    def read_page(items: list[Raw], listed: Any) -> None:
        if items and items[0]["metadata"]["name"] == "b":
            seen_at_second_add.append(list(h.handler.calls))
        original(items, listed)

    h.informer._read_page = read_page  # type: ignore[method-assign]
    h.conn.watches.append(
        [
            ev("ADDED", pod("a", "1")),
            ev("BOOKMARK", {"metadata": {"resourceVersion": "5"}}),  # not the end
            ev("ADDED", pod("b", "2")),
            initial_end("10"),
            ev("MODIFIED", pod("a", "11", app="x")),
            ev("DELETED", pod("b", "12")),
        ]
    )
    h.start()
    await h.informer.wait_synced()
    await h.until(lambda: len(h.handler.calls) == 4)
    # nothing was handed on before the end bookmark; then the whole state, then the
    # stream's own events
    assert seen_at_second_add == [[]]
    assert h.handler.calls == [
        ("add", "default/a", "1"),
        ("add", "default/b", "2"),
        ("update", "default/a", "1", "11"),
        ("delete", "default/b"),
    ]
    assert h.informer.resource_version == "12"
    assert h.conn.list_queries == []  # no LIST at all
    assert h.conn.watch_queries == [
        {
            "fieldSelector": "status.phase!=Succeeded",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "resourceVersion": "",
            "allowWatchBookmarks": "true",
        }
    ]
    assert h.informer.statistics().lists == 1
    await h.stop()


async def test_after_a_watch_list_the_next_watch_resumes_from_its_resource_version() -> None:
    h = Harness(watch_list=True)
    h.conn.watches.append([ev("ADDED", pod("a", "1")), initial_end("10"), END])
    h.conn.watches.append([ev("ADDED", pod("c", "11"))])
    h.start()
    await h.until(lambda: len(h.handler.calls) == 2)
    assert h.conn.watch_queries[1] == {"resourceVersion": "10", "allowWatchBookmarks": "true"}
    await h.stop()


async def test_a_gone_watch_list_is_tried_again_and_emits_only_the_differences() -> None:
    h = Harness(watch_list=True)
    h.conn.watches.append([ev("ADDED", pod("keep", "1")), ev("ADDED", pod("vanish", "2"))])
    h.conn.watches[0] += [initial_end("5"), gone_event()]
    h.conn.watches.append([ev("ADDED", pod("keep", "1")), ev("ADDED", pod("new", "7"))])
    h.conn.watches[1].append(initial_end("9"))
    h.start()
    await h.until(lambda: h.informer.resource_version == "9")
    assert h.handler.calls == [
        ("add", "default/keep", "1"),
        ("add", "default/vanish", "2"),
        ("add", "default/new", "7"),
        ("delete", "default/vanish"),
    ]
    assert h.conn.list_queries == []
    assert h.informer.statistics().gone == 1
    await h.stop()


async def test_a_watch_list_cut_before_its_end_is_tried_again_with_nothing_applied() -> None:
    h = Harness(watch_list=True)
    h.conn.watches.append([ev("ADDED", pod("a", "1")), ConnectionFailed("reset")])
    h.conn.watches.append([ev("ADDED", pod("b", "2")), initial_end("6")])
    h.start()
    await h.informer.wait_synced()
    assert h.handler.calls == [("add", "default/b", "2")]
    assert [q.get("sendInitialEvents") for q in h.conn.watch_queries] == ["true", "true"]
    assert h.delays == [1.0]
    await h.stop()


@pytest.mark.parametrize("refusal", [Invalid(422, "Invalid", "sendInitialEvents is forbidden")])
async def test_a_refused_watch_list_falls_back_to_list_for_good(refusal: Exception) -> None:
    h = Harness(watch_list=True)
    h.conn.watches.append([refusal])
    h.conn.lists.append(page(pod("a", "1"), rv="5"))
    h.conn.watches.append([gone_event()])
    h.conn.lists.append(page(pod("a", "1"), rv="8"))
    h.start()
    await h.until(lambda: len(h.conn.list_queries) == 2)
    await h.informer.wait_synced()
    assert h.handler.calls == [("add", "default/a", "1")]
    # the refusal, then plain watches only
    assert [q.get("sendInitialEvents") for q in h.conn.watch_queries] == ["true", None]
    await h.stop()


async def test_a_watch_list_that_ends_without_its_end_bookmark_falls_back_to_list() -> None:
    # a server that ignores sendInitialEvents answers with a plain watch from now on
    h = Harness(watch_list=True)
    h.conn.watches.append([ev("ADDED", pod("late", "3")), END])
    h.conn.lists.append(page(pod("a", "1"), rv="5"))
    h.start()
    await h.informer.wait_synced()
    assert h.handler.calls == [("add", "default/a", "1")]
    assert len(h.conn.list_queries) == 1
    await h.stop()
