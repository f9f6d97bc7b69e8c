"""The scheduler's volume binder (upstream volumebinding/binder.go); matching a claim to
a static PV (pv_helpers.go) is scheduler.plugins.volume_matching.

- `pod_volume_claims`: sort the pod's claims into bound, unbound with delayed binding
  (WaitForFirstConsumer) and unbound immediate; list the candidate PVs per class once.
- `find_pod_volumes`: per node, check bound claims' PV node affinity, match static PVs
  for unbound claims (smallest fitting volume), else check the class can provision
  there (allowedTopologies, CSIStorageCapacity when the driver tracks capacity).
- `assume_pod_volumes` / `revert_assumed`: Reserve / Unreserve in the assume cache.
- `bind_pod_volumes`: PreBind: write the PV claimRefs and the PVC selected-node
  annotations (PUT, as upstream), then poll every second, up to bindTimeoutSeconds,
  until the PV controller (and the provisioner) report every claim fully bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from scheduler.clock import Clock
from scheduler.framework.handle import Handle
from scheduler.model.csi import CSIStorageCapacityInfo
from scheduler.model.pod import PodInfo
from scheduler.model.pod_volumes import PodVolume
from scheduler.model.volume import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    CLAIM_LOST,
    NOT_SUPPORTED_PROVISIONER,
    PVCInfo,
    PVInfo,
    pv_from_dict,
    pvc_from_dict,
)
from scheduler.plugins.volume_assume_cache import OutOfSyncError, VolumeAssumeCache
from scheduler.plugins.volume_matching import (
    AffinityCheck,
    Candidates,
    find_matching_volume,
    prepare_candidates,
    pv_affinity,
)

# upstream binder.go ConflictReason values, in the order FindPodVolumes reports them
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

POLL_INTERVAL = 1.0  # upstream: wait.PollUntilContextTimeout(ctx, time.Second, ...)


class BinderError(RuntimeError):
    """An internal error (upstream returns it as an error, the framework as Status Error)."""


def _rv(version: str) -> int:
    try:
        return int(version)
    except ValueError:
        return 0


def claim_not_owned(pod: PodInfo, pvc: PVCInfo) -> str | None:
    """upstream ephemeral.VolumeIsForPod: the message when `pvc` is not the pod's own."""
    if pvc.namespace != pod.namespace or not pvc.controller_uid or pvc.controller_uid != pod.uid:
        return (
            f"PVC {pvc.namespace}/{pvc.name} was not created for pod "
            f"{pod.namespace}/{pod.name} (pod is not owner)"
        )
    return None


@dataclass
class StaticBinding:
    pvc: PVCInfo
    pv: PVInfo


@dataclass
class DynamicProvision:
    pvc: PVCInfo
    node_capacity: CSIStorageCapacityInfo | None = None


@dataclass
class PodVolumes:
    static_bindings: list[StaticBinding] = field(default_factory=list)
    dynamic_provisions: list[DynamicProvision] = field(default_factory=list)


@dataclass
class PodVolumeClaims:
    bound: list[PVCInfo] = field(default_factory=list)
    unbound_delay: list[PVCInfo] = field(default_factory=list)
    unbound_immediate: list[PVCInfo] = field(default_factory=list)
    volumes_by_class: dict[str, list[PVInfo]] = field(default_factory=dict)
    # claim key -> its PVs, prepared once per cycle (see prepare_candidates)
    candidates: dict[str, Candidates] = field(default_factory=dict)

    def volumes(self) -> list[PVInfo]:
        """Every PV whose node affinity a Filter may ask about."""
        seen: dict[str, PVInfo] = {}
        for prebound, others in self.candidates.values():
            for pv in (*prebound, *others):
                seen[pv.name] = pv
        return list(seen.values())


class VolumeBinder:
    def __init__(
        self,
        handle: Handle,
        bind_timeout: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.handle = handle
        self.storage = handle.storage
        self.cache = VolumeAssumeCache(handle.storage)
        self.bind_timeout = bind_timeout
        self._sleep = sleep

    @property
    def clock(self) -> Clock:
        return self.handle.clock

    # ---------------------------------------------------------------- PreFilter
    def _claim_of(self, pod: PodInfo, vol: PodVolume) -> tuple[bool, PVCInfo | None]:
        """upstream isVolumeBound: (fully bound, claim); raises on a missing claim."""
        pvc = self.cache.get_pvc(pod.namespace, vol.claim_name)
        if pvc is None:
            raise BinderError(
                f'error getting PVC "{pod.namespace}/{vol.claim_name}": '
                f'persistentvolumeclaim "{vol.claim_name}" not found'
            )
        if vol.ephemeral:
            msg = claim_not_owned(pod, pvc)
            if msg is not None:
                raise BinderError(msg)
        return pvc.fully_bound, pvc

    def pod_volume_claims(self, pod: PodInfo) -> PodVolumeClaims:
        out = PodVolumeClaims()
        for vol in pod.volumes:
            if not vol.claim_name:
                continue
            bound, pvc = self._claim_of(pod, vol)
            assert pvc is not None
            if bound:
                out.bound.append(pvc)
                continue
            if self._delay_binding(pvc) and not pvc.volume_name:
                out.unbound_delay.append(pvc)
            else:
                out.unbound_immediate.append(pvc)
        for pvc in out.unbound_delay:
            if pvc.storage_class not in out.volumes_by_class:
                out.volumes_by_class[pvc.storage_class] = self.cache.list_pvs(pvc.storage_class)
            out.candidates[pvc.key] = prepare_candidates(
                pvc, out.volumes_by_class[pvc.storage_class]
            )
        return out

    def _delay_binding(self, pvc: PVCInfo) -> bool:
        """upstream IsDelayBindingMode: a class that exists and waits for a consumer."""
        if not pvc.storage_class:
            return False
        sc = self.storage.get_storage_class(pvc.storage_class)
        return sc is not None and sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER

    def all_bound(self, pod: PodInfo) -> bool:
        """upstream arePodVolumesBound (through the assume cache)."""
        for vol in pod.volumes:
            if not vol.claim_name:
                continue
            try:
                bound, _ = self._claim_of(pod, vol)
            except BinderError:
                return False
            if not bound:
                return False
        return True

    # ---------------------------------------------------------------- Filter
    def find_pod_volumes(
        self,
        pod: PodInfo,
        claims: PodVolumeClaims,
        node_name: str,
        labels: Mapping[str, str],
        affinity: AffinityCheck = pv_affinity,
    ) -> tuple[PodVolumes, list[str]]:
        result = PodVolumes()
        bound_ok = True
        bound_found = True
        unbound_ok = True
        space_ok = True
        for pvc in claims.bound:  # upstream checkBoundClaims: stops at the first problem
            pv = self.cache.get_pv(pvc.volume_name)
            if pv is None:
                bound_found = False
                break
            if not affinity(pv, node_name, labels):
                bound_ok = False
                break
        if claims.unbound_delay:  # checked whatever the bound claims' verdict
            to_match: list[PVCInfo] = []
            to_provision: list[PVCInfo] = []
            for pvc in claims.unbound_delay:
                selected = pvc.selected_node
                if selected is not None:
                    if selected != node_name:  # being provisioned for another node
                        return result, _reasons(bound_ok, False, space_ok, bound_found)
                    to_provision.append(pvc)
                else:
                    to_match.append(pvc)
            if to_match:
                unbound_ok, result.static_bindings, unmatched = self._find_matching(
                    to_match, claims, node_name, labels, affinity
                )
                to_provision.extend(unmatched)
            if to_provision:
                unbound_ok, space_ok, result.dynamic_provisions = self._check_provisions(
                    to_provision, labels
                )
        return result, _reasons(bound_ok, unbound_ok, space_ok, bound_found)

    def _find_matching(
        self,
        to_match: list[PVCInfo],
        claims: PodVolumeClaims,
        node_name: str,
        labels: Mapping[str, str],
        affinity: AffinityCheck,
    ) -> tuple[bool, list[StaticBinding], list[PVCInfo]]:
        """upstream findMatchingVolumes: smallest claims first, each PV used once."""
        chosen: dict[str, PVInfo] = {}
        bindings: list[StaticBinding] = []
        unmatched: list[PVCInfo] = []
        ok = True
        for pvc in sorted(to_match, key=lambda c: c.request_storage or 0):
            prepared = claims.candidates.get(pvc.key)
            if prepared is None:
                prepared = prepare_candidates(
                    pvc, claims.volumes_by_class.get(pvc.storage_class, [])
                )
            pv = find_matching_volume(prepared, node_name, labels, chosen, affinity)
            if pv is None:
                unmatched.append(pvc)
                ok = False
                continue
            chosen[pv.name] = pv
            bindings.append(StaticBinding(pvc, pv))
        return ok, bindings, unmatched

    def _check_provisions(
        self, claims: list[PVCInfo], labels: Mapping[str, str]
    ) -> tuple[bool, bool, list[DynamicProvision]]:
        """upstream checkVolumeProvisions: (satisfied, sufficient storage, provisions)."""
        out: list[DynamicProvision] = []
        for pvc in claims:
            if not pvc.storage_class:
                raise BinderError(f'no class for claim "{pvc.key}"')
            sc = self.storage.get_storage_class(pvc.storage_class)
            if sc is None:
                raise BinderError(f'failed to find storage class "{pvc.storage_class}"')
            if not sc.provisioner or sc.provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not sc.allows(labels):
                return False, True, []
            sufficient, capacity = self._has_enough_capacity(sc.provisioner, pvc, labels)
            if not sufficient:
                return True, False, []
            out.append(DynamicProvision(pvc, capacity))
        return True, True, out

    def _has_enough_capacity(
        self, provisioner: str, pvc: PVCInfo, labels: Mapping[str, str]
    ) -> tuple[bool, CSIStorageCapacityInfo | None]:
        if pvc.request_storage is None:
            return True, None
        driver = self.storage.get_csi_driver(provisioner)
        if driver is None or not driver.storage_capacity:
            return True, None
        caps = sorted(self.storage.list_csi_storage_capacities(), key=lambda c: c.key)
        for cap in caps:
            limit = cap.volume_limit
            if (
                cap.storage_class_name == pvc.storage_class
                and limit is not None
                and limit >= pvc.request_storage
                and cap.node_topology is not None
                and cap.node_topology.matches(labels)
            ):
                return True, cap
        return False, None

    # ---------------------------------------------------------------- Reserve
    def assume_pod_volumes(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> bool:
        """Assume the node's choices; True when every claim is already bound (nothing to
        do at PreBind). Replaces `volumes`' entries with the assumed versions."""
        if self.all_bound(pod):
            return True
        new_bindings: list[StaticBinding] = []
        try:
            for b in volumes.static_bindings:
                pv, dirty = b.pv.bound_copy(b.pvc)
                if dirty:
                    self.cache.assume_pv(pv)
                new_bindings.append(StaticBinding(b.pvc, pv))
        except OutOfSyncError as exc:
            for nb in new_bindings:
                self.cache.restore_pv(nb.pv)
            raise BinderError(str(exc)) from exc
        new_provisions: list[DynamicProvision] = []
        try:
            for d in volumes.dynamic_provisions:
                claim = d.pvc.with_selected_node(node_name)
                self.cache.assume_pvc(claim)
                new_provisions.append(DynamicProvision(claim))
        except OutOfSyncError as exc:
            for nb in new_bindings:
                self.cache.restore_pv(nb.pv)
            for np_ in new_provisions:
                self.cache.restore_pvc(np_.pvc)
            raise BinderError(str(exc)) from exc
        volumes.static_bindings = new_bindings
        volumes.dynamic_provisions = new_provisions
        return False

    def revert_assumed(self, volumes: PodVolumes) -> None:
        for b in volumes.static_bindings:
            self.cache.restore_pv(b.pv)
        for d in volumes.dynamic_provisions:
            self.cache.restore_pvc(d.pvc)

    # ---------------------------------------------------------------- PreBind
    async def bind_pod_volumes(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> None:
        await self._api_update(volumes)
        deadline = self.clock.now() + self.bind_timeout
        while True:
            # upstream polls without an immediate first check
            await self._sleep(min(POLL_INTERVAL, max(0.0, deadline - self.clock.now())))
            try:
                done = self._check_bindings(pod, node_name, volumes)
            except BinderError as exc:
                raise BinderError(f"binding volumes: {exc}") from exc
            if done:
                return
            if self.clock.now() >= deadline:
                raise BinderError("binding volumes: context deadline exceeded")

    async def _api_update(self, volumes: PodVolumes) -> None:
        """upstream bindAPIUpdate: PUT the PVs, then the claims; whatever was not
        written is taken out of the assume cache."""
        api = self.handle.volume_api
        bindings = volumes.static_bindings
        provisions = volumes.dynamic_provisions
        done_b = done_p = 0
        try:
            for b in bindings:
                b.pv = pv_from_dict(await api.update_pv(b.pv.raw))
                done_b += 1
            for d in provisions:
                d.pvc = pvc_from_dict(await api.update_pvc(d.pvc.raw))
                done_p += 1
        finally:
            for b in bindings[done_b:]:
                self.cache.restore_pv(b.pv)
            for d in provisions[done_p:]:
                self.cache.restore_pvc(d.pvc)

    def _check_bindings(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> bool:
        """upstream checkBindings: True when all done, False to keep waiting; raises
        when the binding can no longer succeed."""
        node = self.handle.node_lookup(node_name)
        if node is None:
            raise BinderError(f'failed to get node "{node_name}": node "{node_name}" not found')
        if not self.handle.pod_exists(pod):
            raise BinderError(f'pod does not exist any more: pods "{pod.name}" not found')
        for b in volumes.static_bindings:
            pv = self.cache.pv_api(b.pv.name)
            if pv is None:
                raise BinderError(
                    f'failed to check binding: persistentvolume "{b.pv.name}" not found'
                )
            pvc = self.cache.pvc_api(b.pvc.namespace, b.pvc.name)
            if pvc is None:
                raise BinderError(
                    f'failed to check binding: persistentvolumeclaim "{b.pvc.name}" not found'
                )
            if _rv(b.pv.resource_version) > _rv(pv.resource_version):
                return False  # the informer has not seen our write yet
            if not pv.matches_node(node.labels):
                raise BinderError(
                    f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                    "no matching NodeSelectorTerms"
                )
            if pv.claim is None or not pv.claim.uid:
                raise BinderError(f'ClaimRef got reset for pv "{pv.name}"')
            if not pvc.fully_bound:
                return False
        for d in volumes.dynamic_provisions:
            pvc = self.cache.pvc_api(d.pvc.namespace, d.pvc.name)
            if pvc is None:
                raise BinderError(
                    "failed to check provisioning pvc: "
                    f'persistentvolumeclaim "{d.pvc.name}" not found'
                )
            if _rv(d.pvc.resource_version) > _rv(pvc.resource_version):
                return False
            if not pvc.annotations:
                raise BinderError(f'selectedNode annotation reset for PVC "{pvc.name}"')
            if pvc.selected_node != node_name:
                raise BinderError(f'provisioning failed for PVC "{pvc.name}"')
            if pvc.volume_name:
                pv = self.cache.pv_api(pvc.volume_name)
                if pv is None:
                    return False
                if not pv.matches_node(node.labels):
                    raise BinderError(
                        f'pv "{pv.name}" node affinity doesn\'t match node "{node_name}": '
                        "no matching NodeSelectorTerms"
                    )
            if not pvc.fully_bound:
                return False
        return True


def _reasons(bound_ok: bool, unbound_ok: bool, space_ok: bool, bound_found: bool) -> list[str]:
    out: list[str] = []
    if not bound_ok:
        out.append(REASON_NODE_CONFLICT)
    if not unbound_ok:
        out.append(REASON_BIND_CONFLICT)
    if not space_ok:
        out.append(REASON_NOT_ENOUGH_SPACE)
    if not bound_found:
        out.append(REASON_PV_NOT_EXIST)
    return out


__all__ = [
    "CLAIM_LOST",
    "BinderError",
    "DynamicProvision",
    "PodVolumeClaims",
    "PodVolumes",
    "StaticBinding",
    "VolumeBinder",
    "claim_not_owned",
]
