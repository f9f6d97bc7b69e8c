"""NodeTree: node names grouped by zone, listed zone by zone (upstream's nodeTree).

The order in which a cycle walks the nodes decides which nodes it evaluates once a
cluster has more than 100 of them (only percentageOfNodesToScore are searched), so it
follows upstream v1.37.2 pkg/scheduler/backend/cache/node_tree.go exactly:
- a zone is the key `region + ":\\x00:" + zone` (GetZoneKey, k8s.io/component-helpers
  node/topology/helpers.go: the failure-domain.beta labels first, then the topology
  ones; "" when a node has neither);
- zones are kept in the order they were first seen; a zone whose last node goes is
  dropped, and comes back at the end when a node joins it again;
- nodes within a zone are in add order; removal closes the gap (later ones move up);
- `list()` interleaves the zones round robin: the first node of every zone, then the
  second of every zone, and so on.

Upstream rebuilds the snapshot's node list from `list()` only when a node was added
to or removed from the snapshot (cache.go UpdateSnapshot, updateAllLists), so a zone
change on update moves the node in the tree but not in the list until then; the Cache
(cache.py) mirrors that.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)

# k8s.io/api/core/v1 well-known labels, in the order GetZoneKey reads them
LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"


def zone_key(labels: Mapping[str, str]) -> str:
    """upstream GetZoneKey: unique per failure zone; "" for a node without zone or region.
    A present beta label wins even when empty (Go's `if !ok`)."""
    zone = labels.get(LABEL_FAILURE_DOMAIN_BETA_ZONE)
    if zone is None:
        zone = labels.get(LABEL_TOPOLOGY_ZONE, "")
    region = labels.get(LABEL_FAILURE_DOMAIN_BETA_REGION)
    if region is None:
        region = labels.get(LABEL_TOPOLOGY_REGION, "")
    if not region and not zone:
        return ""
    return region + ":\x00:" + zone


class NodeTree:
    """Node names per zone key. Not thread-safe; owned by the Cache."""

    def __init__(self) -> None:
        self._tree: dict[str, list[str]] = {}
        self._zones: list[str] = []  # in the order first seen
        self.num_nodes = 0

    def add_node(self, name: str, zone: str) -> None:
        """upstream addNode: appended to its zone (a new zone goes last); a name already
        in that zone is left where it is."""
        names = self._tree.get(zone)
        if names is None:
            self._zones.append(zone)
            self._tree[zone] = [name]
        elif name in names:
            log.info("did not add node=%s to the node tree: it already exists", name)
            return
        else:
            names.append(name)
        self.num_nodes += 1

    def remove_node(self, name: str, zone: str) -> bool:
        """upstream removeNode: False when `name` is not in `zone` (upstream's error)."""
        names = self._tree.get(zone)
        if names is not None and name in names:
            names.remove(name)
            if not names:
                del self._tree[zone]
                self._zones.remove(zone)
            self.num_nodes -= 1
            return True
        log.error("did not remove node=%s from the node tree: not found in its zone", name)
        return False

    def update_node(self, old_zone: str | None, name: str, new_zone: str) -> None:
        """upstream updateNode: nothing unless the zone key changed (no old node counts
        as zone ""); then removed from the old zone, whether there or not, and added."""
        if (old_zone or "") == new_zone:
            return
        self.remove_node(name, old_zone or "")
        self.add_node(name, new_zone)

    def list(self) -> list[str]:
        """upstream list: the zones' first nodes in zone order, then their second, ..."""
        out: list[str] = []
        zones = [self._tree[z] for z in self._zones]
        depth = max((len(names) for names in zones), default=0)
        for i in range(depth):
            for names in zones:
                if i < len(names):
                    out.append(names[i])
        return out
