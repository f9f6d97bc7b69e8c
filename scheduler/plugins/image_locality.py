"""ImageLocality (Score): prefer nodes that already hold the pod's images, weighted by
how widely each image is spread (upstream: size * nodesWithImage/totalNodes, clamped
between 23Mi and 1000Mi per container, scaled to 0..100)."""

from __future__ import annotations

import numpy as np

from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.framework import signature
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchScorePlugin,
    IntArray,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def _priority(sum_scores: IntArray, num_containers: int) -> IntArray:
    max_threshold = MAX_CONTAINER_THRESHOLD * max(num_containers, 1)
    clamped = np.clip(sum_scores, MIN_THRESHOLD, max_threshold)
    out: IntArray = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return out


class ImageLocality(BatchScorePlugin, SignPlugin):
    """Batch form only: the score needs the whole snapshot (how many nodes hold each
    image), which the runtime hands to score_batch."""

    name = names.IMAGE_LOCALITY

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        table = snapshot.table
        total_nodes = max(snapshot.num_nodes, 1)
        acc = np.zeros(table.capacity, dtype=np.int64)
        for img in pod.images:
            holders = table.images.get(img)
            if not holders:
                continue
            spread = len(holders) / total_nodes
            idx = np.fromiter(holders.keys(), dtype=np.int64, count=len(holders))
            sizes = np.fromiter(holders.values(), dtype=np.float64, count=len(holders))
            np.add.at(acc, idx, (sizes * spread).astype(np.int64))
        return _priority(acc[slots], len(pod.images))

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream ImageLocality.SignPod: the set of the pod's normalized image names."""
        return ((signature.IMAGE_NAMES, signature.image_names_signer(pod)),), Status.success()


def new(args: object, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
