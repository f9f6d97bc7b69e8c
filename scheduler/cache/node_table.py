"""NodeTable: per-node numbers as numpy arrays, for batch Filter and Score.

Rows are slots; a node keeps its slot for life (a removed node's slot is reused).
Columns:
- alloc[slot, r] / req[slot, r]: allocatable and requested per resource index
  (`resources` maps a resource name to its column; cpu in millicores);
- nz_req[slot, 0|1]: non-zero requested cpu/memory (scoring);
- pod_count, max_pods, unschedulable, live;
- labels: per label key an int32 code column (-1 = node lacks the key), value <-> code
  maps, and an integer view of the values for Gt/Lt (as strconv.ParseInt reads them);
- taints: every node's taint tuple is interned to a taint-set id, so a pod's tolerations
  are checked once per distinct taint set, not once per node;
- images: image -> {slot: size}.

Vectorised selector matching (`match_node_selector`, `match_label_map`) lives here
because it needs the columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_view import NodeView
from scheduler.model.node import NodeInfo
from scheduler.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from scheduler.model.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    FIELD_NODE_NAME,
    GT,
    IN,
    NOT_IN,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    parse_go_int64,
)
from scheduler.model.taints import Taint

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)


class LabelColumn:
    """One label key across all slots."""

    __slots__ = ("_int_ok", "_ints", "codes", "value_codes", "values")

    def __init__(self, capacity: int) -> None:
        self.codes: Int32Array = np.full(capacity, -1, dtype=np.int32)
        self.value_codes: dict[str, int] = {}
        self.values: list[str] = []
        self._ints: IntArray | None = None
        self._int_ok: BoolArray | None = None

    def code(self, value: str) -> int:
        c = self.value_codes.get(value)
        if c is None:
            c = len(self.values)
            self.value_codes[value] = c
            self.values.append(value)
            self._ints = None
        return c

    def ints(self) -> tuple[IntArray, BoolArray]:
        """Per code: the value as an int64 and whether it parses (Go's ParseInt: no
        underscores, no overflow); index -1 (absent) does not parse. int64, not float:
        exact over the whole int64 range."""
        if self._ints is None or self._int_ok is None or len(self._ints) != len(self.values) + 1:
            ints = np.zeros(len(self.values) + 1, dtype=np.int64)
            ok = np.zeros(len(self.values) + 1, dtype=np.bool_)
            for i, v in enumerate(self.values):
                n = parse_go_int64(v)
                if n is not None:
                    ints[i] = n
                    ok[i] = True
            self._ints, self._int_ok = ints, ok
        return self._ints, self._int_ok


class NodeTable:
    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.size = 0  # slots ever used (high-water mark)
        self.index: dict[str, int] = {}
        self.names: list[str | None] = []
        self._free: list[int] = []
        self.resources: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        r = len(self.resources)
        self.alloc: IntArray = np.zeros((capacity, r), dtype=np.int64)
        self.req: IntArray = np.zeros((capacity, r), dtype=np.int64)
        self.nz_req: IntArray = np.zeros((capacity, 2), dtype=np.int64)
        self.pod_count: IntArray = np.zeros(capacity, dtype=np.int64)
        self.max_pods: IntArray = np.zeros(capacity, dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.live: BoolArray = np.zeros(capacity, dtype=np.bool_)
        self.labels: dict[str, LabelColumn] = {}
        self._row_labels: list[Mapping[str, str]] = []
        self.taint_set_id: Int32Array = np.zeros(capacity, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_index: dict[tuple[Taint, ...], int] = {(): 0}
        self.images: dict[str, dict[int, int]] = {}
        self._row_images: list[Mapping[str, int]] = []
        # the (immutable) NodeInfo each row's node columns were last written from
        self._row_node: list[NodeInfo | None] = []
        self._live_slots: IntArray | None = None
        self.version = 0  # bumped on every row change

    # ------------------------------------------------------------ structure
    @property
    def num_nodes(self) -> int:
        return len(self.index)

    def live_slots(self) -> IntArray:
        """Slots of live nodes in slot order (the search order before rotation)."""
        if self._live_slots is None:
            self._live_slots = np.flatnonzero(self.live[: self.size]).astype(np.int64)
        return self._live_slots

    def column(self, resource: str) -> int | None:
        return self.resources.get(resource)

    def _grow_rows(self) -> None:
        new = self.capacity * 2

        def grow(a: np.ndarray, fill: object = 0) -> np.ndarray:  # type: ignore[type-arg]
            shape = (new, *a.shape[1:])
            out = np.full(shape, fill, dtype=a.dtype)
            out[: self.capacity] = a
            return out

        self.alloc = grow(self.alloc)
        self.req = grow(self.req)
        self.nz_req = grow(self.nz_req)
        self.pod_count = grow(self.pod_count)
        self.max_pods = grow(self.max_pods)
        self.unschedulable = grow(self.unschedulable, False)
        self.live = grow(self.live, False)
        self.taint_set_id = grow(self.taint_set_id)
        for col in self.labels.values():
            col.codes = grow(col.codes, -1)
        self.capacity = new

    def _resource_column(self, name: str) -> int:
        c = self.resources.get(name)
        if c is None:
            c = len(self.resources)
            self.resources[name] = c
            pad = np.zeros((self.capacity, 1), dtype=np.int64)
            self.alloc = np.hstack([self.alloc, pad])
            self.req = np.hstack([self.req, pad])
        return c

    def _label_column(self, key: str) -> LabelColumn:
        col = self.labels.get(key)
        if col is None:
            col = LabelColumn(self.capacity)
            self.labels[key] = col
        return col

    # ------------------------------------------------------------ rows
    def allocate(self, name: str) -> int:
        slot = self.index.get(name)
        if slot is not None:
            return slot
        if self._free:
            slot = self._free.pop()
            self.names[slot] = name
        else:
            if self.size == self.capacity:
                self._grow_rows()
            slot = self.size
            self.size += 1
            self.names.append(name)
            self._row_labels.append({})
            self._row_images.append({})
            self._row_node.append(None)
        self.index[name] = slot
        self.live[slot] = True
        self._live_slots = None
        return slot

    def set_row(self, slot: int, view: NodeView) -> None:
        node = view.node
        assert node is not None
        self.version += 1
        for res in view.requested:
            if res not in self.resources:
                self._resource_column(res)
        cols = self.resources
        req_row = self.req[slot]
        req_row[:] = 0
        for res, amount in view.requested.items():
            req_row[cols[res]] = amount
        self.nz_req[slot, 0] = view.non_zero_cpu
        self.nz_req[slot, 1] = view.non_zero_memory
        self.pod_count[slot] = len(view.pods)
        # A NodeInfo is immutable: the row's node columns (allocatable, labels, taints,
        # images) already hold this very object's values when it wrote them last. After a
        # bind only the pod sums change, so this skips most of the row write (issue 12).
        if self._row_node[slot] is not node:
            self._set_node_columns(slot, node)
            self._row_node[slot] = node

    def _set_node_columns(self, slot: int, node: NodeInfo) -> None:
        for res in node.allocatable:
            if res != PODS and res not in self.resources:
                self._resource_column(res)
        cols = self.resources
        alloc_row = self.alloc[slot]
        alloc_row[:] = 0
        for res, amount in node.allocatable.items():
            if res != PODS:
                alloc_row[cols[res]] = amount
        self.max_pods[slot] = node.allocatable.get(PODS, 0)
        self.unschedulable[slot] = node.unschedulable
        # labels: clear keys the node lost, write the rest
        old = self._row_labels[slot]
        if old is not node.labels:
            for k in old:
                if k not in node.labels:
                    self.labels[k].codes[slot] = -1
            for k, v in node.labels.items():
                if old.get(k) != v or k not in old:
                    col = self._label_column(k)
                    col.codes[slot] = col.code(v)
            self._row_labels[slot] = node.labels
        ts = node.taints
        tid = self._taint_set_index.get(ts)
        if tid is None:
            tid = len(self.taint_sets)
            self.taint_sets.append(ts)
            self._taint_set_index[ts] = tid
        self.taint_set_id[slot] = tid
        old_images = self._row_images[slot]
        if old_images is not node.images:
            for img in old_images:
                holders = self.images.get(img)
                if holders is not None:
                    holders.pop(slot, None)
                    if not holders:
                        del self.images[img]
            for img, size in node.images.items():
                holders = self.images.setdefault(img, {})
                # upstream keeps one size per image name, the one of the node that
                # brought the name into its cache, until no node holds it
                # (pkg/scheduler/backend/cache/cache.go addNodeImageStates)
                holders[slot] = next(iter(holders.values()), size)
            self._row_images[slot] = node.images

    def release(self, name: str) -> int | None:
        slot = self.index.pop(name, None)
        if slot is None:
            return None
        self.version += 1
        self.live[slot] = False
        self.names[slot] = None
        self.alloc[slot] = 0
        self.req[slot] = 0
        self.nz_req[slot] = 0
        self.pod_count[slot] = 0
        self.max_pods[slot] = 0
        self.unschedulable[slot] = False
        self.taint_set_id[slot] = 0
        for k in self._row_labels[slot]:
            self.labels[k].codes[slot] = -1
        self._row_labels[slot] = {}
        for img in self._row_images[slot]:
            holders = self.images.get(img)
            if holders is not None:
                holders.pop(slot, None)
                if not holders:
                    del self.images[img]
        self._row_images[slot] = {}
        self._row_node[slot] = None
        self._free.append(slot)
        self._live_slots = None
        return slot

    # ------------------------------------------------------------ vectorised matching
    def _requirement_mask(self, r: Requirement, slots: IntArray) -> BoolArray:
        col = self.labels.get(r.key)
        n = len(slots)
        if col is None:
            absent_ok = r.operator in (NOT_IN, DOES_NOT_EXIST)
            return np.full(n, absent_ok, dtype=np.bool_)
        codes = col.codes[slots]
        op = r.operator
        if op == EXISTS:
            return codes >= 0
        if op == DOES_NOT_EXIST:
            return codes < 0
        if op in (IN, NOT_IN):
            wanted = [col.value_codes[v] for v in r.values if v in col.value_codes]
            if not wanted:
                hit = np.zeros(n, dtype=np.bool_)
            elif len(wanted) == 1:
                hit = codes == wanted[0]
            else:
                hit = np.isin(codes, wanted)
            return hit if op == IN else ~hit
        want = r.number
        if want is None:
            return np.zeros(n, dtype=np.bool_)
        ints, ok = col.ints()
        vals = ints[codes]
        return ok[codes] & ((vals > want) if op == GT else (vals < want))

    def _term_mask(self, term: NodeSelectorTerm, slots: IntArray) -> BoolArray:
        if term.errors or (not term.expressions and not term.fields):
            # a term that does not parse matches nothing (upstream LazyErrorNodeSelector)
            return np.zeros(len(slots), dtype=np.bool_)
        mask = np.ones(len(slots), dtype=np.bool_)
        for r in term.expressions:
            mask &= self._requirement_mask(r, slots)
        for r in term.fields:
            if r.key == FIELD_NODE_NAME:
                idx = {self.index[n] for n in r.values if n in self.index}
                hit = np.isin(slots, list(idx)) if idx else np.zeros(len(slots), dtype=np.bool_)
            else:
                # a node has no other field; it reads as "" (fields.Set.Get)
                hit = np.full(len(slots), "" in r.values, dtype=np.bool_)
            mask &= hit if r.operator == IN else ~hit
        return mask

    def match_node_selector(self, selector: NodeSelector, slots: IntArray) -> BoolArray:
        mask = np.zeros(len(slots), dtype=np.bool_)
        for term in selector.terms:
            mask |= self._term_mask(term, slots)
        return mask

    def match_node_selector_term(self, term: NodeSelectorTerm, slots: IntArray) -> BoolArray:
        return self._term_mask(term, slots)

    def match_label_map(self, wanted: Mapping[str, str], slots: IntArray) -> BoolArray:
        """Nodes whose labels include every key=value of `wanted` (pod nodeSelector)."""
        mask = np.ones(len(slots), dtype=np.bool_)
        for k, v in wanted.items():
            col = self.labels.get(k)
            code = col.value_codes.get(v) if col is not None else None
            if col is None or code is None:
                return np.zeros(len(slots), dtype=np.bool_)
            mask &= col.codes[slots] == code
        return mask

    def has_all_keys(self, keys: Iterable[str], slots: IntArray) -> BoolArray:
        mask = np.ones(len(slots), dtype=np.bool_)
        for k in keys:
            col = self.labels.get(k)
            if col is None:
                return np.zeros(len(slots), dtype=np.bool_)
            mask &= col.codes[slots] >= 0
        return mask
