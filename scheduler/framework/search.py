"""SearchState: where the next node search starts, the tie-break randomness and the
scheduling cycle count.

Shared by every profile of one scheduler (as upstream's nextStartNodeIndex, and the
queue's schedulingCycle that opportunistic batching reads as sched.CurrentCycle()).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class SearchState:
    next_start: int = 0
    rng: random.Random = field(default_factory=random.Random)
    # one per pod the loop pops (upstream counts every Pop, skipped pods included);
    # batching reuses a cycle's results only in the very next cycle
    cycle: int = 0
