"""What the DRA plugin reads between cycles: the ResourceSlices, DeviceClasses and
ResourceClaims the informers keep, and the devices that allocated claims hold.

Upstream keeps the same in its DRA manager (kubernetes@v1.37.2 pkg/scheduler/framework/
plugins/dynamicresources/dra_manager.go: listers plus the in-flight allocations of claims
between Reserve and the informer seeing the written status) and in allocatedDevices
(allocateddevices.go: devices of allocated claims, updated by the claim informer's
events). As there, a result with admin access holds nothing; a result with a share ID
holds a share of its device and the capacity it consumed (DRAConsumableCapacity, on in
v1.37.2), not the whole device.

Held devices are counted rather than kept in a set: two claims never hold one device
without sharing, so the answer is the same as upstream's, and a claim counted twice for a
moment (a pending allocation and the written copy) cannot free the device early.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import TypeVar

from scheduler.dra.allocator import AllocatedState, DeviceID
from scheduler.dra.class_resolver import DeviceClassResolver
from scheduler.dra.pools import SliceIndex
from scheduler.dra.resources import (
    AllocatedDevice,
    ClaimRecord,
    DeviceClassRecord,
    DeviceTaintRule,
    SliceRecord,
    with_taint_rules,
)


def _dedicated(devices: Iterable[AllocatedDevice]) -> Iterable[DeviceID]:
    for d in devices:
        if not d.admin_access and not d.share_id:
            yield (d.driver, d.pool, d.device)


def _newer_or_same(claim: ClaimRecord, than: ClaimRecord) -> bool:
    """Resource versions compare as integers, as upstream's assume cache reads them; one
    that is not an integer is taken as newer (the informer's copy wins)."""
    try:
        return int(claim.resource_version) >= int(than.resource_version)
    except ValueError:
        return True


def _shares(devices: Iterable[AllocatedDevice]) -> Iterable[AllocatedDevice]:
    for d in devices:
        if not d.admin_access and d.share_id:
            yield d


K = TypeVar("K")


def _decrement(counts: Counter[K], key: K) -> None:
    """One holder fewer; a key no one holds any more is gone (never zero or below)."""
    left = counts[key] - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


class DeviceState:
    """The informers write it (on the event loop); each scheduling cycle reads it once,
    in PreFilter, through `allocated_state`. `revision` changes with every change to the
    held devices, so a reader can tell whether what it computed is still current.

    Claims are seen as upstream's assume cache shows them: the informer's copy, or the
    copy PreBind wrote (`assume_written`) until the informer shows that version or a
    newer one. Devices are held by the claims as seen, plus the pending allocations
    Reserve signals before PreBind writes them."""

    def __init__(self) -> None:
        self.slices: dict[str, SliceRecord] = {}
        self.taint_rules: dict[str, DeviceTaintRule] = {}
        # the slices with the rules' taints, rebuilt after a change to either
        self._patched: SliceIndex | None = None
        self.classes: dict[str, DeviceClassRecord] = {}
        # extended resources backed by the classes (upstream's DeviceClassResolver)
        self.class_resolver = DeviceClassResolver()
        self.claims: dict[str, ClaimRecord] = {}  # the informer's copies
        self.assumed: dict[str, ClaimRecord] = {}  # written by PreBind, not yet seen
        # claim uid -> (the claim with its pending allocation, pods sharing it)
        self.pending: dict[str, tuple[ClaimRecord, int]] = {}
        self.revision = 0
        self._dedicated: Counter[DeviceID] = Counter()
        self._shares: Counter[tuple[DeviceID, str]] = Counter()
        self._capacity: dict[DeviceID, dict[str, Fraction]] = {}
        # (driver, pool) -> changes to the devices held in it (AllocatedState.pool_versions)
        self._pool_versions: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ listers
    def set_slice(self, s: SliceRecord) -> None:
        self.slices[s.name] = s
        self._patched = None

    def drop_slice(self, s: SliceRecord) -> None:
        self.slices.pop(s.name, None)
        self._patched = None

    def set_taint_rule(self, rule: DeviceTaintRule) -> None:
        self.taint_rules[rule.name] = rule
        self._patched = None

    def drop_taint_rule(self, rule: DeviceTaintRule) -> None:
        self.taint_rules.pop(rule.name, None)
        self._patched = None

    def allocation_slices(self) -> SliceIndex:
        """The slices the allocator reads: with the DeviceTaintRules' taints on their
        devices (upstream's ListWithDeviceTaintRules), indexed by node and pool."""
        if self._patched is None:
            rules = list(self.taint_rules.values())
            self._patched = SliceIndex(with_taint_rules(s, rules) for s in self.slices.values())
        return self._patched

    def set_class(self, c: DeviceClassRecord) -> None:
        old = self.classes.get(c.name)
        self.classes[c.name] = c
        if old is None:
            self.class_resolver.on_add(c)
        else:
            self.class_resolver.on_update(old, c)

    def drop_class(self, c: DeviceClassRecord) -> None:
        self.classes.pop(c.name, None)
        self.class_resolver.on_delete(c)

    def get_claim(self, namespace: str, name: str) -> ClaimRecord | None:
        key = f"{namespace}/{name}"
        return self.assumed.get(key) or self.claims.get(key)

    def all_claims(self) -> Iterator[ClaimRecord]:
        """Every claim as seen (the written copy where PreBind wrote one), any namespace:
        upstream's ResourceClaims().List() over the assume cache."""
        for key, claim in self.claims.items():
            yield self.assumed.get(key, claim)
        for key, claim in self.assumed.items():
            if key not in self.claims:
                yield claim

    def _seen(self, key: str, change: Callable[[], None]) -> None:
        """Apply `change`, then move the held devices from the claim as seen before to
        the claim as seen after."""
        before = self.assumed.get(key) or self.claims.get(key)
        change()
        after = self.assumed.get(key) or self.claims.get(key)
        if after is not before:
            if before is not None:
                self._release(before)
            if after is not None:
                self._hold(after)

    def set_claim(self, claim: ClaimRecord) -> None:
        def change() -> None:
            self.claims[claim.key] = claim
            assumed = self.assumed.get(claim.key)
            if assumed is not None and _newer_or_same(claim, assumed):
                del self.assumed[claim.key]

        self._seen(claim.key, change)

    def drop_claim(self, claim: ClaimRecord) -> None:
        def change() -> None:
            self.claims.pop(claim.key, None)
            self.assumed.pop(claim.key, None)

        self._seen(claim.key, change)

    def assume_written(self, claim: ClaimRecord) -> None:
        """PreBind wrote this version (upstream AssumeClaimAfterAPICall)."""
        self._seen(claim.key, lambda: self.assumed.__setitem__(claim.key, claim))

    def restore(self, key: str) -> None:
        """Unreserve: back to the informer's copy (upstream AssumedClaimRestore)."""
        self._seen(key, lambda: self._forget_assumed(key))

    def _forget_assumed(self, key: str) -> None:
        self.assumed.pop(key, None)

    # ------------------------------------------------------ pending allocations
    def pending_allocation(self, uid: str) -> ClaimRecord | None:
        entry = self.pending.get(uid)
        return entry[0] if entry is not None else None

    def signal_pending(self, claim: ClaimRecord) -> None:
        """Reserve (upstream SignalClaimPendingAllocation): `claim` carries the allocation
        chosen for it; its devices count from now on. A second pod sharing the claim
        adds a sharer; a claim already allocated as seen gets no pending entry."""
        entry = self.pending.get(claim.uid)
        if entry is not None:
            self.pending[claim.uid] = (entry[0], entry[1] + 1)
            return
        seen = self.get_claim(claim.namespace, claim.name)
        if seen is not None and seen.uid == claim.uid and seen.allocated:
            return
        self.pending[claim.uid] = (claim, 1)
        self._hold(claim)

    def remove_pending(self, uid: str, *, force: bool) -> bool:
        """Unreserve (one sharer fewer) or PreBind's success (`force`); True when the
        entry is gone (upstream MaybeRemoveClaimPendingAllocation)."""
        entry = self.pending.get(uid)
        if entry is None:
            return False
        claim, sharers = entry
        if force or sharers == 1:
            del self.pending[uid]
            self._release(claim)
            return True
        self.pending[uid] = (claim, sharers - 1)
        return False

    # --------------------------------------------------------- held devices
    def _touch_pools(self, claim: ClaimRecord) -> None:
        versions = self._pool_versions
        for pool in {(d.driver, d.pool) for d in claim.allocated_devices}:
            versions[pool] = versions.get(pool, 0) + 1

    def _hold(self, claim: ClaimRecord) -> None:
        if not claim.allocated:
            return
        self.revision += 1
        self._touch_pools(claim)
        self._dedicated.update(_dedicated(claim.allocated_devices))
        for d in _shares(claim.allocated_devices):
            device = (d.driver, d.pool, d.device)
            self._shares[(device, d.share_id)] += 1
            if d.consumed_capacity:
                held = self._capacity.setdefault(device, {})
                for name, amount in d.consumed_capacity.items():
                    held[name] = held.get(name, Fraction(0)) + amount

    def _release(self, claim: ClaimRecord) -> None:
        if not claim.allocated:
            return
        self.revision += 1
        self._touch_pools(claim)
        # only the entries this claim touched can reach zero: dropped one by one (a
        # `+counter` copy would walk every held device of the cluster per release)
        for device in _dedicated(claim.allocated_devices):
            _decrement(self._dedicated, device)
        for d in _shares(claim.allocated_devices):
            device = (d.driver, d.pool, d.device)
            _decrement(self._shares, (device, d.share_id))
            held = self._capacity.get(device)
            if held is not None and d.consumed_capacity:
                for name, amount in d.consumed_capacity.items():
                    if name in held:  # ConsumedCapacity.Sub ignores unknown names
                        held[name] -= amount
                if all(v == 0 for v in held.values()):
                    del self._capacity[device]  # ConsumedCapacityCollection.Remove

    def allocated_state(self) -> AllocatedState:
        """A copy for one cycle (upstream's PreFilter clones the sets the same way)."""
        return AllocatedState(
            devices=set(self._dedicated),
            shared=set(self._shares),
            capacity={d: dict(c) for d, c in self._capacity.items()},
            pool_versions=dict(self._pool_versions),
        )

    def holders(self) -> Mapping[DeviceID, int]:
        """How many claims hold each whole device (a test's check that none is held twice)."""
        return dict(self._dedicated)
