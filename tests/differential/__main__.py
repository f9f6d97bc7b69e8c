"""python -m tests.differential [--scenarios N] [--seed S] [--only I ...] [--out FILE]
                                [--ties | --gangs]

Runs upstream kube-scheduler v1.37.2 and this scheduler side by side on a fresh local
cluster, on N random scenarios, and prints every difference and a summary table.
Exits 1 when any difference was found."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tests.differential.run import main_gangs, main_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__)
    ap.add_argument("--scenarios", type=int, default=150, help="how many scenarios (default 150)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, nargs="*", help="run just these scenario indices")
    ap.add_argument("--out", type=Path, help="write every decision and difference as JSON")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (logs)")
    ap.add_argument(
        "--ties",
        action="store_true",
        help="preemption scenarios whose victims tie on priority and start time",
    )
    ap.add_argument(
        "--gangs",
        action="store_true",
        help="PodGroups (GenericWorkload on both sides): placed, pending, messages",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("KAS_CLUSTER_DIE_WITH_PARENT", "1")
    indices = args.only if args.only else list(range(args.scenarios))
    if args.gangs:
        return main_gangs(args.seed, indices, args.keep)
    return main_run(args.seed, indices, args.out, args.keep, ties=args.ties)


if __name__ == "__main__":
    sys.exit(main())
