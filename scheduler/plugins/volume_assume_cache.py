"""The scheduler-side overlay of assumed PV and PVC versions (upstream volumebinding
passive_assume_cache.go).

At Reserve, VolumeBinding assumes the PV it chose as bound to the claim (claimRef set)
and the claims it will provision as annotated with the selected node. Later cycles read
volumes through this cache, so a second pod does not pick the same PV while the first is
still binding. An assumed object is only valid while the informer still holds the very
version it was derived from: once the informer has a newer resourceVersion (our own
write coming back, or anyone else's), the API object wins and the assumption is gone.
Restore (Unreserve) drops an assumption it made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

from scheduler.framework.handle import StorageLister
from scheduler.model.volume import PVCInfo, PVInfo


class OutOfSyncError(RuntimeError):
    pass


class _Versioned(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


_V = TypeVar("_V", bound=_Versioned)


class _Assumptions(Generic[_V]):
    """Assumed versions of one kind, by key, each valid while the informer still holds
    the version it was derived from."""

    def __init__(self, kind: str, read: Callable[[str], _V | None]) -> None:
        self._kind = kind  # as the API names it in a not-found error
        self._read = read  # the informer's object by key
        self._by_key: dict[str, _V] = {}

    def get(self, key: str) -> _V | None:
        """The assumed version while current, else the informer's."""
        return self.overlay(key, self._read(key))

    def overlay(self, key: str, api: _V | None) -> _V | None:
        if api is None:
            self._by_key.pop(key, None)
            return None
        assumed = self._by_key.get(key)
        if assumed is None:
            return api
        if assumed.resource_version != api.resource_version:
            del self._by_key[key]  # the informer moved on: the assumption expired
            return api
        return assumed

    def assume(self, key: str, obj: _V) -> None:
        stored = self._read(key)
        if stored is None:
            raise OutOfSyncError(f'{self._kind} "{obj.name}" not found')
        if stored.resource_version != obj.resource_version:
            raise OutOfSyncError(
                f'"{key}" is out of sync (stored: {stored.resource_version}, '
                f"assume: {obj.resource_version})"
            )
        self._by_key[key] = obj

    def restore(self, key: str, obj: _V) -> None:
        assumed = self._by_key.get(key)
        if assumed is not None and assumed.resource_version == obj.resource_version:
            del self._by_key[key]

    def current(self) -> int:
        """How many assumptions are still current."""
        return sum(1 for key in list(self._by_key) if self.get(key) is self._by_key.get(key))


def _pvc_by_key(storage: StorageLister) -> Callable[[str], PVCInfo | None]:
    def read(key: str) -> PVCInfo | None:
        namespace, _, name = key.partition("/")
        return storage.get_pvc(namespace, name)

    return read


class VolumeAssumeCache:
    def __init__(self, storage: StorageLister) -> None:
        self._storage = storage
        self._pvs: _Assumptions[PVInfo] = _Assumptions("persistentvolume", storage.get_pv)
        self._pvcs: _Assumptions[PVCInfo] = _Assumptions(
            "persistentvolumeclaim", _pvc_by_key(storage)
        )

    # ---------------------------------------------------------------- PVs
    def pv_api(self, name: str) -> PVInfo | None:
        return self._storage.get_pv(name)

    def get_pv(self, name: str) -> PVInfo | None:
        return self._pvs.get(name)

    def list_pvs(self, storage_class: str) -> list[PVInfo]:
        """The class's volumes, each in its assumed version where one holds."""
        pvs: Iterable[PVInfo] = self._storage.list_pvs()
        return [
            self._pvs.overlay(pv.name, pv) or pv for pv in pvs if pv.storage_class == storage_class
        ]

    def assume_pv(self, pv: PVInfo) -> None:
        self._pvs.assume(pv.name, pv)

    def restore_pv(self, pv: PVInfo) -> None:
        self._pvs.restore(pv.name, pv)

    # ---------------------------------------------------------------- PVCs
    def pvc_api(self, namespace: str, name: str) -> PVCInfo | None:
        return self._storage.get_pvc(namespace, name)

    def get_pvc(self, namespace: str, name: str) -> PVCInfo | None:
        return self._pvcs.get(f"{namespace}/{name}")

    def assume_pvc(self, pvc: PVCInfo) -> None:
        self._pvcs.assume(pvc.key, pvc)

    def restore_pvc(self, pvc: PVCInfo) -> None:
        self._pvcs.restore(pvc.key, pvc)

    # ---------------------------------------------------------------- introspection
    def assumed_counts(self) -> tuple[int, int]:
        """(assumed PVs, assumed PVCs) that are still current."""
        return self._pvs.current(), self._pvcs.current()
