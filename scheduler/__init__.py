"""kube-async-scheduler: a Kubernetes secondary scheduler with asynchronous preemption."""

import os

# numpy's OpenBLAS starts a thread per core when numpy is imported, and those threads
# spin: about 0.13 s of CPU at every process start here (more on a loaded machine, where
# they compete with the process's own work), a third of what `run --config` costs to
# refuse a bad file. The scheduler's matrix products are small and run on the event
# loop's thread, so one BLAS thread is all it uses. Set before anything imports numpy;
# an operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
