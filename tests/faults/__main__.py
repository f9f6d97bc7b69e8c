"""python -m tests.faults: run the fault cases and print a table of their results.

python -m tests.faults --list
python -m tests.faults                       # every case, full form
python -m tests.faults --reduced             # the CI form
python -m tests.faults --only soak --minutes 30 --out results.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scheduler
from tests.faults.registry import RunContext, cases, run_case
from tests.faults.result import CaseResult


def _commit(folder: Path) -> str:
    """The git commit of the tree holding `folder` ("+dirty" when it has changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=folder)  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, check=True, cwd=folder)  # fmt: skip
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _table(results: list[CaseResult]) -> str:
    rows = [("case", "result", "invariants", "seconds", "figures")]
    for r in results:
        ok = sum(1 for c in r.checks if c.ok)
        figures = "; ".join(f"{k}={v}" for k, v in r.figures.items())
        rows.append((r.name, "PASS" if r.passed else "FAIL", f"{ok}/{len(r.checks)}",
                     f"{r.seconds:.0f}", figures))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    all_cases = cases()
    p = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--only", action="append", choices=sorted(all_cases), metavar="NAME",
                   help="run only this case (repeatable)")  # fmt: skip
    p.add_argument("--reduced", action="store_true", help="the reduced (CI) form of each case")
    p.add_argument("--minutes", type=float, help="length of the soak (full form: 30)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--workdir", type=Path, help="keep clusters and logs here (default: a temp dir)")
    args = p.parse_args(argv)
    if args.list:
        for c in all_cases.values():
            print(f"{c.name:20} {c.summary}")
        return 0
    if args.minutes is not None and args.minutes <= 0:
        p.error("--minutes must be positive")
    chosen = [all_cases[n] for n in (args.only or list(all_cases))]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="faults-"))
    # the scheduler under test may come from another tree than the suite (PYTHONPATH)
    commit = _commit(Path(scheduler.__file__).resolve().parent)
    suite = _commit(Path(__file__).resolve().parent)
    mode = "reduced" if args.reduced else "full"
    print(f"fault suite: {len(chosen)} case(s), {mode} form, scheduler at commit {commit} "
          f"(suite at {suite}), work dir {workdir}")  # fmt: skip
    results: list[CaseResult] = []
    t0 = time.monotonic()
    for i, case in enumerate(chosen, 1):
        start = time.monotonic()

        def say(msg: str, name: str = case.name, start: float = start) -> None:
            print(f"[{time.monotonic() - start:6.1f}s] {name}: {msg}", flush=True)

        print(f"=== [{i}/{len(chosen)}] {case.name}: {case.summary}", flush=True)
        ctx = RunContext(workdir / case.name, full=not args.reduced, say=say, minutes=args.minutes)
        r = run_case(case, ctx)
        results.append(r)
        print(r.summary(), flush=True)
        print(f"--- progress: {i}/{len(chosen)} done, {sum(x.passed for x in results)} passed, "
              f"{time.monotonic() - t0:.0f}s elapsed", flush=True)  # fmt: skip
        if args.out:  # written after each case, so an interrupted run keeps what it did
            args.out.write_text(json.dumps(
                {"scheduler_commit": commit, "suite_commit": suite, "mode": mode,
                 "results": [x.as_dict() for x in results]},
                indent=2, default=str))  # fmt: skip
    print()
    print(_table(results))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
