"""Benchmarks: kube-async-scheduler side by side with upstream kube-scheduler and the
API server's own binding limit (`python -m bench run --suite smoke`)."""
