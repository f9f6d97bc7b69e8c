"""Matching a claim to a static PersistentVolume (upstream FindMatchingVolume in
k8s.io/component-helpers/storage/volume/pv_helpers.go), split for the scheduler: the
node-independent checks once per cycle, the PV's node affinity per node, optionally from
an index built for all of a cycle's candidate nodes at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.model.volume import VOLUME_AVAILABLE, PVCInfo, PVInfo

# a node-independent part of FindMatchingVolume: (PVs pre-bound to the claim, in list
# order; the other usable PVs, smallest first, ties in list order)
Candidates = tuple[list[PVInfo], list[PVInfo]]
# does this PV's node affinity admit the node? (pv, node name, node labels)
AffinityCheck = Callable[[PVInfo, str, Mapping[str, str]], bool]


def pv_affinity(pv: PVInfo, node_name: str, labels: Mapping[str, str]) -> bool:
    return pv.matches_node(labels)


class AffinityIndex:
    """Which PVs' node affinity admits which nodes, computed for one cycle's candidate
    nodes at once (`everywhere`: PVs without node affinity). Covers every PV it was
    built for, or none (`complete` False: the per-PV check)."""

    def __init__(
        self,
        by_node: dict[str, frozenset[str]],
        everywhere: frozenset[str] = frozenset(),
        complete: bool = True,
    ) -> None:
        self._by_node = by_node
        self._everywhere = everywhere
        self._complete = complete

    def __call__(self, pv: PVInfo, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self._complete:
            return pv.matches_node(labels)
        return pv.name in self._everywhere or pv.name in self._by_node.get(node_name, ())

    def admitted(self, node_name: str) -> frozenset[str] | None:
        """PV names admitting the node (None: not known, ask per PV)."""
        if not self._complete:
            return None
        here = self._by_node.get(node_name, frozenset())
        return here | self._everywhere if self._everywhere else here


def prepare_candidates(pvc: PVCInfo, volumes: list[PVInfo]) -> Candidates:
    """upstream FindMatchingVolume (with a node, delayed binding) split in two: every
    check that does not depend on the node, done once per cycle. A PV pre-bound to the
    claim decides alone (it, if its affinity admits the node, else nothing); otherwise
    the smallest available volume that fits wins."""
    requested = pvc.request_storage or 0
    prebound: list[PVInfo] = []
    others: list[tuple[int, int, PVInfo]] = []
    for i, pv in enumerate(volumes):
        if pv.claim is not None and not pv.bound_to(pvc):
            continue
        if pv.capacity < requested:
            continue
        if pv.volume_mode != pvc.volume_mode:
            continue
        if pv.attributes_class != pvc.attributes_class:  # VolumeAttributesClass is GA
            continue
        if pv.deletion_timestamp is not None:
            continue
        if pv.bound_to(pvc):
            prebound.append(pv)
            continue
        if pv.phase != VOLUME_AVAILABLE:
            continue
        if pvc.selector is not None and not pvc.selector.matches(pv.labels):
            continue
        if pv.storage_class != pvc.storage_class:
            continue
        if not all(m in pv.access_modes for m in pvc.access_modes):
            continue
        others.append((pv.capacity, i, pv))
    others.sort(key=lambda t: (t[0], t[1]))
    return prebound, [pv for _, _, pv in others]


def find_matching_volume(
    candidates: Candidates,
    node_name: str,
    labels: Mapping[str, str],
    excluded: Mapping[str, PVInfo],
    affinity: AffinityCheck = pv_affinity,
) -> PVInfo | None:
    """The node-dependent rest of upstream FindMatchingVolume."""
    prebound, others = candidates
    admitted = affinity.admitted(node_name) if isinstance(affinity, AffinityIndex) else None
    if admitted is not None:  # the same verdicts, from a precomputed index
        if not admitted:
            return None
        for pv in prebound:
            if pv.name not in excluded:
                return pv if pv.name in admitted else None
        for pv in others:
            if pv.name in admitted and pv.name not in excluded:
                return pv
        return None
    for pv in prebound:
        if pv.name not in excluded:
            return pv if affinity(pv, node_name, labels) else None
    for pv in others:
        if pv.name not in excluded and affinity(pv, node_name, labels):
            return pv
    return None
