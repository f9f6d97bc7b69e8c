"""kube-async-scheduler: a Kubernetes secondary scheduler with asynchronous preemption."""

__version__ = "0.1.0"
