"""PreemptionPolicy objects listed and watched into the store, on the scheduler's own
connection, supervised, failing closed.

Replaces an embedded kopf operator, which fell short of what a protection needs
(kopf 1.45: a watch ERROR other than 410 ends its watcher for good, and so does a 404
once the CRD is gone; handlers are not told when the initial listing is complete; it
logs in through a kubeconfig parser of its own, without exec plugins or token files).
What kopf did for us is kept elsewhere already: validation is the store's (a Ready=False
condition), status is the PolicyStatusWriter's, through the scheduler's dispatcher.

- The list and watch are the project's Informer (pages, resourceVersions, 410, backoff)
  with `relist_after_error`: any failure is followed by a fresh LIST, so the view is
  proven again rather than assumed (scheduler.policy.sync).
- The Informer runs inside a restart loop: if it dies anyway (its task cancelled, a
  bug), the failure is recorded, the view is not current, and a fresh Informer starts
  after a capped, jittered backoff. `run()` itself only ends by cancellation at shutdown;
  it is a long-lived task of the scheduler's Supervisor, so a death is a liveness failure.
- The CRD check: after every complete listing and every deletion of a policy, one GET of
  the CRD. A deletion counts as an operator's only when the CRD is served with the uid
  it had; otherwise the policies went with the CRD and the store holds them in force.
  A CRD that is missing, being deleted, not Established or unreadable (RBAC) makes the
  view not current; such a check is repeated with backoff until the CRD is served.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from scheduler.client.backoff import Backoff
from scheduler.client.connection import Connection
from scheduler.client.errors import ApiError, NotFound
from scheduler.client.informer import Informer, Resource
from scheduler.metrics import PolicyMetrics
from scheduler.policy.spec import GROUP, PLURAL, VERSION
from scheduler.policy.store import PolicyStore
from scheduler.policy.sync import PolicySync

__all__ = ["CRD_NAME", "CRD_PATH", "POLICIES", "WATCH_TIMEOUT_SECONDS", "PolicyWatcher"]

log = logging.getLogger(__name__)

POLICIES = Resource(GROUP, VERSION, PLURAL)
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
WATCH_TIMEOUT_SECONDS = 60
"""Each watch request's timeoutSeconds: a connection that died silently is noticed at the
latest this long (plus the client's read slack) after it went quiet."""

Raw = dict[str, Any]


def _name(raw: Raw) -> str:
    return str((raw.get("metadata") or {}).get("name") or "")


def crd_problem(crd: Raw) -> str | None:
    """None when the CRD serves its objects; else what is wrong with it."""
    if (crd.get("metadata") or {}).get("deletionTimestamp"):
        return f"CRD {CRD_NAME} is being deleted"
    for cond in (crd.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Established":
            return None if cond.get("status") == "True" else f"CRD {CRD_NAME} is not Established"
    return f"CRD {CRD_NAME} is not Established"


class PolicyWatcher:
    """The Informer's handler too: its records are the raw objects."""

    def __init__(
        self,
        connection: Connection,
        store: PolicyStore,
        sync: PolicySync,
        *,
        metrics: PolicyMetrics | None = None,
        restart_backoff: Backoff | None = None,
        check_backoff: Backoff | None = None,
        list_backoff: Callable[[], Backoff] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
    ) -> None:
        self._connection = connection
        self.store = store
        self.sync = sync
        self.metrics = metrics if metrics is not None else PolicyMetrics()
        self._restart_backoff = restart_backoff or Backoff(initial=0.5, maximum=10.0)
        self._check_backoff = check_backoff or Backoff(initial=0.5, maximum=10.0)
        # between failed LISTs/WATCHes: one small LIST, so a short cap (client-go's
        # reflector waits up to 30 s) keeps a re-created CRD's time to sync in seconds
        self._list_backoff = list_backoff or (lambda: Backoff(initial=0.5, maximum=5.0))
        self._sleep = sleep
        self._watch_timeout = watch_timeout_seconds
        self._check_wanted = asyncio.Event()
        self._crd_uid: str | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self.informer: Informer[Raw] | None = None  # the one running now
        self.restarts = 0
        self.checks = 0

    # ---- the Informer's handler ------------------------------------------------------
    def on_add(self, obj: Raw) -> None:
        self.store.apply(obj)

    def on_update(self, old: Raw, new: Raw) -> None:
        self.store.apply(new)

    def on_delete(self, obj: Raw) -> None:
        self.store.delete(_name(obj))
        if self.store.pending_deletions:
            self._check_wanted.set()

    # ---- observers -------------------------------------------------------------------
    def _listed(self, _: str) -> None:
        # a fresh Informer (after a restart) starts empty, so its first listing reports
        # no deletions: what the store holds and the listing lacks was deleted meanwhile
        assert self.informer is not None
        for name in self.store.listed_names() - set(self.informer.store.keys()):
            self.store.delete(name)
        self._restart_backoff.reset()
        self.sync.listed()
        self._check_wanted.set()

    def _failed(self, _: str, exc: Exception) -> None:
        self.metrics.watch_failures.inc()
        self.sync.failed(f"PreemptionPolicy list/watch failed: {_short(exc)}")

    def became_current(self) -> None:
        """PolicySync.on_current (wired by the runtime): start the held policies' clock."""
        self._expire_later(self.store.start_hold_clock())

    def _expire_later(self, delay: float | None) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if delay is not None:
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(
                delay, lambda: self._expire_later(self.store.expire_held())
            )

    # ---- run -------------------------------------------------------------------------
    async def run(self) -> None:
        """Until cancelled: the list+watch (restarted when it dies) and the CRD checks."""
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._watch_forever(), name="preemption-policies-watch")
                tasks.create_task(self._check_forever(), name="preemption-policies-crd")
        finally:
            if self._expiry is not None:
                self._expiry.cancel()

    def _new_informer(self) -> Informer[Raw]:
        informer: Informer[Raw] = Informer(
            self._connection,
            POLICIES,
            dict,
            self,
            relist_after_error=True,
            watch_timeout_seconds=self._watch_timeout,
            backoff=self._list_backoff(),
            sleep=self._sleep,
            name=PLURAL,
        )
        informer.on_list = self._listed
        informer.on_error = self._failed
        return informer

    async def _watch_forever(self) -> None:
        me = asyncio.current_task()
        while True:
            self.informer = informer = self._new_informer()
            try:
                await informer.run()
                why = "the informer returned"
            except asyncio.CancelledError:
                if me is not None and me.cancelling():
                    raise  # shutdown
                why = "the informer's task was cancelled"
            except Exception as exc:
                why = f"the informer died: {_short(exc)}"
            self.restarts += 1
            self.metrics.watcher_restarts.inc()
            self.sync.failed(f"PreemptionPolicy watcher restarting ({why})")
            delay = self._restart_backoff.next_delay()
            log.error("PreemptionPolicy watcher died (%s); restarting in %.2fs", why, delay)
            await self._sleep(delay)

    async def _check_forever(self) -> None:
        retry: float | None = None  # after a check that did not find the CRD served
        while True:
            await self._check_requested(retry)
            self._check_wanted.clear()
            if await self.check_crd():
                self._check_backoff.reset()
                retry = None
            else:
                retry = self._check_backoff.next_delay()

    async def _check_requested(self, retry: float | None) -> None:
        """Until a check is asked for (a listing, a deletion) or, after a failed one,
        its retry is due: a re-created CRD's first listing is checked at once, not at
        the end of a backoff."""
        wanted = asyncio.ensure_future(self._check_wanted.wait())
        waits: set[asyncio.Future[Any]] = {wanted}
        if retry is not None:
            waits.add(asyncio.ensure_future(self._sleep(retry)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def check_crd(self) -> bool:
        """One check of the CRD; False when it is not served or could not be read (the
        check is then repeated with backoff until it is)."""
        self.checks += 1
        try:
            crd = await self._connection.request("GET", CRD_PATH)
        except asyncio.CancelledError:
            raise
        except NotFound:
            self.store.hold_deletions()
            self.sync.crd_checked(f"CRD {CRD_NAME} not found")
            return False
        except Exception as exc:
            # deletions stay pending (in force) until the CRD can be read
            self.sync.crd_checked(f"cannot read CRD {CRD_NAME}: {_short(exc)}")
            log.warning("cannot read CRD %s: %s", CRD_NAME, exc)
            return False
        problem = crd_problem(crd)
        uid = str((crd.get("metadata") or {}).get("uid") or "")
        replaced = self._crd_uid is not None and uid != self._crd_uid
        if problem is not None or replaced:
            self.store.hold_deletions()
        else:
            self.store.confirm_deletions()
        if problem is None:
            if replaced:
                log.warning("CRD %s was re-created (uid %s -> %s)", CRD_NAME, self._crd_uid, uid)
            self._crd_uid = uid
        self.sync.crd_checked(problem)
        return problem is None


def _short(exc: BaseException) -> str:
    text = (str(exc).splitlines() or [""])[0]
    if isinstance(exc, ApiError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}".rstrip(": ")
