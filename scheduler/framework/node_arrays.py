"""The array types the framework speaks of nodes in: slot lists, per-node scores and
reason indexes over the snapshot's NodeTable (one entry per node slot).

A module of their own because both the extension-point Protocols (interfaces.py) and the
Diagnosis that PostFilter receives (diagnosis.py) are written in them, and neither may
import the other's module for it (interfaces names Diagnosis in PostFilter's signature).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
