"""`python -m scheduler` is the same as the `kube-async-scheduler` console script."""

from scheduler.cli import main

raise SystemExit(main())
