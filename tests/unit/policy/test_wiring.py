"""scheduler.app with --preemption-policies: the policy watcher uses the app's own
Connection (one identity, one server address), its readiness check is registered as
"preemption-policies", and both its tasks are long-lived tasks of the app's Supervisor."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.policy.sync import NOT_LISTED
from tests.unit.helpers.builders import make_pod


class SilentConnection:
    """Never answers: the watcher stays before its first listing."""

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    async def request_raw(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()


async def test_the_policy_machinery_runs_on_the_apps_connection_and_supervisor() -> None:
    conn = SilentConnection()
    app = SchedulerApp(
        default_config(),
        conn,  # type: ignore[arg-type]
        RunOptions(leader_elect=False, identity="me", preemption_policies=True),
    )
    policies = app.policies
    assert policies is not None
    assert policies.watcher._connection is conn
    assert policies._dispatcher is app.dispatcher
    # not ready, with the reason, until the first listing
    assert app.server._ready["preemption-policies"]() == NOT_LISTED
    policies.start(app.tasks)
    names = {t.get_name() for t in app.tasks.tasks}
    assert {"policy-watcher", "policy-status"} <= names
    await asyncio.sleep(0.05)
    assert app.tasks.healthz() is None
    app.tasks.begin_shutdown()
    await policies.stop()
    assert all(t.done() for t in app.tasks.tasks if t.get_name().startswith("policy-"))
    assert app.tasks.healthz() is None  # stopped at shutdown: not a death


async def test_a_policy_task_that_dies_outside_shutdown_fails_healthz() -> None:
    app = SchedulerApp(
        default_config(),
        SilentConnection(),  # type: ignore[arg-type]
        RunOptions(leader_elect=False, identity="me", preemption_policies=True),
    )
    assert app.policies is not None
    app.policies.start(app.tasks)
    await asyncio.sleep(0.01)
    next(t for t in app.tasks.tasks if t.get_name() == "policy-watcher").cancel()
    await asyncio.sleep(0.01)
    assert "policy-watcher" in (app.tasks.healthz() or "")
    app.tasks.begin_shutdown()
    await app.policies.stop()


async def test_policies_in_sync_give_the_apps_waiting_pods_a_fresh_attempt() -> None:
    # the queue is built after the runtime (preemption reads the runtime's store): the app
    # wires the requeue once the queue exists, and it reaches the queue the loop pops
    app = SchedulerApp(
        default_config(),
        SilentConnection(),  # type: ignore[arg-type]
        RunOptions(leader_elect=False, identity="me", preemption_policies=True),
    )
    assert app.policies is not None
    pod = make_pod("waiting").scheduler(app.profile_names[0]).obj()
    app.queue.add(pod)
    popped = await app.queue.pop()
    assert popped is not None
    app.queue.add_unschedulable_if_not_present(
        popped, ["DefaultPreemption"], app.queue.scheduling_cycle
    )
    app.queue.done(popped.uid)
    assert [where for _, where in app.queue.pending_pods()] == ["unschedulable"]
    app.policies.sync.listed()
    app.policies.sync.crd_checked(None)
    assert app.policies.sync.current
    assert [where for _, where in app.queue.pending_pods()] == ["active"]
