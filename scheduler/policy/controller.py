"""kopf, embedded: PreemptionPolicy objects watched as tasks of the scheduler's own loop.

No second process and no second thread: `kopf.spawn_tasks` starts the operator's tasks
on the running loop, with a registry of our own holding one login handler and one
event handler for preemptionpolicies.scheduling.kas.io only. What kopf would otherwise
do on its own is switched off, because it is not ours to do here:

- peering (standalone): leader election is the scheduler's Lease;
- posting Kubernetes events: the scheduler's EventRecorder posts what it posts;
- scanning the cluster's CRDs at runtime (no list/watch on CRDs is needed): the
  PreemptionPolicy CRD must exist when the scheduler starts (the chart installs it);
- the "ultimate termination" that SIGKILLs a thread still stopping after a timeout;
- SIGINT/SIGTERM: kopf installs its own handlers; the scheduler's are put back at once,
  so the scheduler's ordered shutdown stays in charge, and it stops kopf through its
  stop flag.

The handler is an `on.event` handler: it keeps no progress or diff-base annotations
and adds no finalizers, so kopf itself never writes to the objects. Validation is a
Ready=False condition (no webhook: the API server would need to reach this pod over
TLS); the last valid version stays in force (PolicyStore). Status is written by the
leader only (StatusWriter), through the scheduler's own dispatcher.

This module is the only importer of kopf (tests/unit/test_policy_surface.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import kopf
import yaml

from scheduler.policy.spec import GROUP, PLURAL, VERSION
from scheduler.policy.store import PolicyStore

__all__ = ["PolicyController", "connection_info"]

log = logging.getLogger(__name__)

STOP_GRACE = 5.0


def _from_kubeconfig(path: str) -> kopf.ConnectionInfo:
    """The current context of one kubeconfig file (file references are relative to it)."""
    base = Path(path).expanduser().resolve().parent
    config = yaml.safe_load(Path(path).expanduser().read_text()) or {}

    def named(section: str, name: str) -> dict[str, Any]:
        for item in config.get(section) or []:
            if item.get("name") == name:
                return dict(item.get(section[:-1]) or {})
        raise kopf.LoginError(f"kubeconfig {path}: no {section[:-1]} named {name!r}")

    current = config.get("current-context")
    if not current:
        raise kopf.LoginError(f"kubeconfig {path}: no current-context")
    context = named("contexts", current)
    cluster = named("clusters", context.get("cluster", ""))
    user = named("users", context.get("user", ""))

    def file(value: Any) -> str | None:
        return str(base / value) if isinstance(value, str) and value else None

    return kopf.ConnectionInfo(
        server=cluster.get("server", ""),
        ca_path=file(cluster.get("certificate-authority")),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=cluster.get("insecure-skip-tls-verify"),
        certificate_path=file(user.get("client-certificate")),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=file(user.get("client-key")),
        private_key_data=user.get("client-key-data"),
        token=user.get("token"),
        default_namespace=context.get("namespace"),
    )


def connection_info(kubeconfig: str | None, settings: kopf.OperatorSettings) -> kopf.ConnectionInfo:
    """The same identity the scheduler's own connection uses: the kubeconfig file if one
    is given, else the pod's service account."""
    if kubeconfig:
        return _from_kubeconfig(kubeconfig)
    info = kopf.login_with_service_account(settings=settings)
    if info is None:
        raise kopf.LoginError("no kubeconfig and no in-cluster service account")
    return info  # type: ignore[no-any-return]


class PolicyController:
    """Starts and stops the embedded kopf operator that feeds `store`."""

    def __init__(
        self,
        store: PolicyStore,
        kubeconfig: str | None,
        *,
        on_stop_signal: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.kubeconfig = kubeconfig
        self._on_stop_signal = on_stop_signal
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._tasks: Collection[asyncio.Task[Any]] = ()
        self.events_seen = 0

    def _settings(self) -> kopf.OperatorSettings:
        s = kopf.OperatorSettings()
        s.peering.standalone = True
        s.posting.enabled = False
        s.scanning.disabled = True
        s.process.ultimate_exiting_timeout = None
        # a watch that goes silent is re-opened well before the lease-sized outages
        s.watching.server_timeout = 300
        s.watching.client_timeout = 330
        return s

    def _registry(self, settings: kopf.OperatorSettings) -> kopf.OperatorRegistry:
        registry = kopf.OperatorRegistry()
        kubeconfig = self.kubeconfig

        # both handlers are coroutines: kopf runs plain functions in a thread pool, and
        # the store must only be touched from this loop
        @kopf.on.login(registry=registry)  # type: ignore[untyped-decorator,misc]
        async def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(kubeconfig, settings)

        @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)  # type: ignore[untyped-decorator,misc]
        async def on_event(event: Mapping[str, Any], **_: Any) -> None:
            self.handle(event)

        return registry

    def handle(self, event: Mapping[str, Any]) -> None:
        """One watch event (type None for the initial listing). Returns nothing: a
        result would make kopf patch it into the object's status."""
        self.events_seen += 1
        obj = event.get("object") or {}
        if event.get("type") == "DELETED":
            name = (obj.get("metadata") or {}).get("name", "")
            self.store.delete(str(name))
            return
        self.store.apply(obj)

    async def start(self) -> None:
        kopf_log = logging.getLogger("kopf")
        if kopf_log.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
            # kopf logs every handler run at INFO; the store logs what matters
            kopf_log.setLevel(logging.WARNING)
        settings = self._settings()
        self._tasks = await kopf.spawn_tasks(
            registry=self._registry(settings),
            settings=settings,
            clusterwide=True,
            standalone=True,
            stop_flag=self._stop,
            ready_flag=self._ready,
        )
        self._restore_signal_handlers()
        log.info("PreemptionPolicy controller started")

    def _restore_signal_handlers(self) -> None:
        in_main = threading.current_thread() is threading.main_thread()
        if self._on_stop_signal is None or not in_main:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_stop_signal)

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Raise kopf's stop flag (so its termination guard stands down), then cancel its
        root tasks, as kopf's own run_tasks does once one root task has ended; each
        cancels what it spawned. kopf's run_tasks is not used: it would also cancel
        every other task of this loop, the scheduler's included."""
        self._stop.set()
        await asyncio.sleep(0)
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait(tasks, timeout=grace)
