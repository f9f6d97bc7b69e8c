"""SearchState: where the next node search starts, and the tie-break randomness.

Shared by every profile of one scheduler (as upstream's nextStartNodeIndex).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class SearchState:
    next_start: int = 0
    rng: random.Random = field(default_factory=random.Random)
