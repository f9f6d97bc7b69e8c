"""Development tooling that lives beside the scheduler package and never ships with it.

The local control plane (`kas_dev.cluster`: etcd, kube-apiserver, controller manager,
kwok, real nodes, Prometheus) and the README's demo are what the tests, the benchmarks and
`kube-async-scheduler cluster|demo` run from a checkout of the repository. The wheel and
the image contain only `scheduler` (pyproject.toml's package list, the Dockerfile's COPY),
so a deployed scheduler carries no PKI, process manager or test-cluster client. The
dependency points one way: kas_dev may import scheduler, scheduler never imports kas_dev
except lazily in the CLI's checkout-only commands (scheduler/cli.py).
"""
