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

from collections.abc import Iterable

from scheduler.framework.handle import StorageLister
from scheduler.model.volume import PVCInfo, PVInfo


class OutOfSyncError(RuntimeError):
    pass


class VolumeAssumeCache:
    def __init__(self, storage: StorageLister) -> None:
        self._storage = storage
        self._pvs: dict[str, PVInfo] = {}
        self._pvcs: dict[str, PVCInfo] = {}

    # ---------------------------------------------------------------- PVs
    def pv_api(self, name: str) -> PVInfo | None:
        return self._storage.get_pv(name)

    def get_pv(self, name: str) -> PVInfo | None:
        api = self._storage.get_pv(name)
        if api is None:
            self._pvs.pop(name, None)
            return None
        return self._overlay_pv(api)

    def _overlay_pv(self, api: PVInfo) -> PVInfo:
        assumed = self._pvs.get(api.name)
        if assumed is None:
            return api
        if assumed.resource_version != api.resource_version:
            del self._pvs[api.name]  # the informer moved on: the assumption expired
            return api
        return assumed

    def list_pvs(self, storage_class: str) -> list[PVInfo]:
        """The class's volumes, each in its assumed version where one holds."""
        pvs: Iterable[PVInfo] = self._storage.list_pvs()
        return [self._overlay_pv(pv) for pv in pvs if pv.storage_class == storage_class]

    def assume_pv(self, pv: PVInfo) -> None:
        stored = self._storage.get_pv(pv.name)
        if stored is None:
            raise OutOfSyncError(f'persistentvolume "{pv.name}" not found')
        if stored.resource_version != pv.resource_version:
            raise OutOfSyncError(
                f'"{pv.name}" is out of sync (stored: {stored.resource_version}, '
                f"assume: {pv.resource_version})"
            )
        self._pvs[pv.name] = pv

    def restore_pv(self, pv: PVInfo) -> None:
        assumed = self._pvs.get(pv.name)
        if assumed is not None and assumed.resource_version == pv.resource_version:
            del self._pvs[pv.name]

    # ---------------------------------------------------------------- PVCs
    def pvc_api(self, namespace: str, name: str) -> PVCInfo | None:
        return self._storage.get_pvc(namespace, name)

    def get_pvc(self, namespace: str, name: str) -> PVCInfo | None:
        key = f"{namespace}/{name}"
        api = self._storage.get_pvc(namespace, name)
        if api is None:
            self._pvcs.pop(key, None)
            return None
        assumed = self._pvcs.get(key)
        if assumed is None:
            return api
        if assumed.resource_version != api.resource_version:
            del self._pvcs[key]
            return api
        return assumed

    def assume_pvc(self, pvc: PVCInfo) -> None:
        stored = self._storage.get_pvc(pvc.namespace, pvc.name)
        if stored is None:
            raise OutOfSyncError(f'persistentvolumeclaim "{pvc.name}" not found')
        if stored.resource_version != pvc.resource_version:
            raise OutOfSyncError(
                f'"{pvc.key}" is out of sync (stored: {stored.resource_version}, '
                f"assume: {pvc.resource_version})"
            )
        self._pvcs[pvc.key] = pvc

    def restore_pvc(self, pvc: PVCInfo) -> None:
        assumed = self._pvcs.get(pvc.key)
        if assumed is not None and assumed.resource_version == pvc.resource_version:
            del self._pvcs[pvc.key]

    # ---------------------------------------------------------------- introspection
    def assumed_counts(self) -> tuple[int, int]:
        """(assumed PVs, assumed PVCs) that are still current."""
        pvs = sum(1 for n in list(self._pvs) if self.get_pv(n) is self._pvs.get(n))
        pvcs = 0
        for key in list(self._pvcs):
            ns, _, name = key.partition("/")
            if self.get_pvc(ns, name) is self._pvcs.get(key):
                pvcs += 1
        return pvs, pvcs
