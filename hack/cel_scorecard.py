#!/usr/bin/env python3
"""Try Python CEL libraries on upstream's DRA selector cases (tests/unit/dra/selector_cases.py).

    python3 hack/cel_scorecard.py            # every candidate, a table on stdout
    python3 hack/cel_scorecard.py --json F   # also the raw results

Each candidate is installed at a pinned version into a throwaway venv of its own (under
~/.cache/kube-async-scheduler/cel-scorecard; the libraries install modules of the same
name, so they cannot share one), and this script re-runs itself there as a worker. The
worker gives each library the least it needs to run the cases: the `device` variable
(attributes and capacity as maps of domain to map of id, unqualified names in the
driver's domain) and Kubernetes' quantity and semver functions written naively. What is
scored is the language: parsing, macros, map semantics, optional syntax, `cel.bind`,
string extensions, errors. A case passes when the outcome is upstream's: the same match,
or an error where upstream errs (its wording is not required here).

Also timed: one evaluation of a three-clause selector, in microseconds (the median of
2000, activation built once).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import venv
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES_FILE = ROOT / "tests" / "unit" / "dra" / "selector_cases.py"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kube-async-scheduler"

CANDIDATES = {
    # pure Python (lark parser), Cloud Custodian's; Apache-2.0
    "cel-python": "cel-python==0.5.0",
    # Rust's `cel` crate through PyO3; MIT/Apache-2.0
    "common-expression-language": "common-expression-language==0.10.0",
}

TIMED = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model'
    ' == "a100" && device.attributes["gpu.example.com"].mem > 3'
)

_SUFFIX = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def naive_quantity(text: str) -> Fraction:
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", text)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"quantities must match the regular expression: {text}")
    return Fraction(m.group(1)) * _SUFFIX[m.group(2)]


def naive_semver(text: str, normalize: bool = False) -> tuple[int, int, int, str]:
    if normalize:
        text = text.removeprefix("v")
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?", text)
    if not m:
        raise ValueError(f"invalid semver {text}")
    pre = m.group(4) or "~"  # "~" sorts after any prerelease: a release is newer
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def load_cases() -> list[Any]:
    namespace: dict[str, Any] = {}
    source = CASES_FILE.read_text()
    code = compile(source, str(CASES_FILE), "exec")
    namespace["__name__"] = "selector_cases"
    sys.modules.setdefault("selector_cases", type(sys)("selector_cases"))
    exec(code, namespace)  # the table is ours; it only builds dataclasses
    return list(namespace["CASES"])


def device_maps(case: Any) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in case.attributes.items():
        domain, _, ident = name.rpartition("/")
        kind, raw = next(iter(value.items()))
        if kind == "version":
            raw = ("semver", naive_semver(str(raw)))
        attributes.setdefault(domain or case.driver, {})[ident] = raw
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in case.capacity.items():
        domain, _, ident = name.rpartition("/")
        capacity.setdefault(domain or case.driver, {})[ident] = ("quantity", naive_quantity(text))
    return attributes, capacity


# --- workers: one per library, run inside that library's venv ---------------------------


def run_cel_python(cases: list[Any]) -> tuple[dict[str, str], float]:
    import celpy  # type: ignore[import-not-found]
    from celpy import celtypes  # type: ignore[import-not-found]
    from celpy.adapter import json_to_cel  # type: ignore[import-not-found]

    class Q:
        def __init__(self, v: Fraction) -> None:
            self.v = v

    class V:
        def __init__(self, v: tuple[int, int, int, str]) -> None:
            self.v = v

    def cmp(a: Any, b: Any) -> int:
        return (a.v > b.v) - (a.v < b.v)

    functions = {
        "quantity": lambda s: Q(naive_quantity(str(s))),
        "semver": lambda s, n=False: V(naive_semver(str(s), bool(n))),
        "isSemver": lambda s, n=False: celtypes.BoolType(_ok(naive_semver, str(s), bool(n))),
        "isGreaterThan": lambda a, b: celtypes.BoolType(cmp(a, b) > 0),
        "compareTo": lambda a, b: celtypes.IntType(cmp(a, b)),
        "sub": lambda a, b: Q(a.v - b.v),
    }

    class DefaultMap(celtypes.MapType):  # type: ignore[misc]
        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType()

    def value(raw: Any) -> Any:
        if isinstance(raw, tuple):
            return Q(raw[1]) if raw[0] == "quantity" else V(raw[1])
        return json_to_cel(raw)

    def nested(maps: dict[str, dict[str, Any]]) -> Any:
        return DefaultMap(
            {
                celtypes.StringType(d): celtypes.MapType(
                    {celtypes.StringType(k): value(v) for k, v in ids.items()}
                )
                for d, ids in maps.items()
            }
        )

    env = celpy.Environment()
    results: dict[str, str] = {}
    for case in cases:
        attributes, capacity = device_maps(case)
        activation = {
            "device": celtypes.MapType(
                {
                    celtypes.StringType("driver"): celtypes.StringType(case.driver),
                    celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                        bool(case.allow_multiple_allocations)
                    ),
                    celtypes.StringType("attributes"): nested(attributes),
                    celtypes.StringType("capacity"): nested(capacity),
                }
            )
        }
        try:
            program = env.program(env.compile(case.expression), functions=functions)
        except Exception as err:
            results[case.name] = "compile error: " + str(err).splitlines()[0][:80]
            continue
        try:
            out = program.evaluate(activation)
        except Exception as err:
            results[case.name] = "eval error: " + str(err).splitlines()[0][:80]
            continue
        results[case.name] = f"value: {out!r}"[:90]
    timed = env.program(env.compile(TIMED))
    device = {
        "device": json_to_cel(
            {
                "driver": "gpu.example.com",
                "attributes": {"gpu.example.com": {"model": "a100", "mem": 5}},
            }
        )
    }
    return results, _median_us(lambda: timed.evaluate(device))


def run_common_expression_language(cases: list[Any]) -> tuple[dict[str, str], float]:
    import cel  # type: ignore[import-not-found]

    class Q:
        def __init__(self, v: Fraction) -> None:
            self.v = v

    def cmp(a: Any, b: Any) -> int:
        return (a.v > b.v) - (a.v < b.v)

    results: dict[str, str] = {}
    for case in cases:
        attributes, capacity = device_maps(case)
        context = cel.Context()
        # the library converts values to CEL at the boundary: an object of ours cannot
        # pass through it, so quantities and versions travel as tagged lists
        context.add_function("quantity", lambda s: ["q", str(naive_quantity(str(s)))])
        context.add_function(
            "semver", lambda s, n=False: ["v", *map(str, naive_semver(str(s), bool(n)))]
        )
        context.add_function("isSemver", lambda s, n=False: _ok(naive_semver, str(s), bool(n)))

        def key(x: Any) -> Any:
            if x[0] == "q":
                return Fraction(x[1])
            return (int(x[1]), int(x[2]), int(x[3]), x[4])

        context.add_function("isGreaterThan", lambda a, b: key(a) > key(b))
        context.add_function("compareTo", lambda a, b: (key(a) > key(b)) - (key(a) < key(b)))
        context.add_function("sub", lambda a, b: ["q", str(key(a) - key(b))])

        def plain(maps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
            return {
                d: {
                    k: (
                        (["q", str(v[1])] if v[0] == "quantity" else ["v", *map(str, v[1])])
                        if isinstance(v, tuple)
                        else v
                    )
                    for k, v in ids.items()
                }
                for d, ids in maps.items()
            }

        context.add_variable(
            "device",
            {
                "driver": case.driver,
                "allowMultipleAllocations": bool(case.allow_multiple_allocations),
                "attributes": plain(attributes),
                "capacity": plain(capacity),
            },
        )
        try:
            program = cel.compile(case.expression)
        except Exception as err:
            results[case.name] = "compile error: " + str(err).splitlines()[0][:80]
            continue
        try:
            out = program.execute(context)
        except Exception as err:
            results[case.name] = "eval error: " + str(err).splitlines()[0][:80]
            continue
        results[case.name] = f"value: {out!r}"[:90]
    timed = cel.compile(TIMED)
    device = {
        "device": {
            "driver": "gpu.example.com",
            "attributes": {"gpu.example.com": {"model": "a100", "mem": 5}},
        }
    }
    return results, _median_us(lambda: timed.execute(device))


def _ok(fn: Any, *args: Any) -> bool:
    try:
        fn(*args)
    except ValueError:
        return False
    return True


def _median_us(fn: Any) -> float:
    samples = []
    for _ in range(2000):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


WORKERS = {
    "cel-python": run_cel_python,
    "common-expression-language": run_common_expression_language,
}


def verdict(case: Any, outcome: str) -> bool:
    if case.expect_compile_error or case.expect_match_error:
        # upstream errs (at compile or at evaluation): any error of ours is the same
        # decision for the allocator (a compile error and a runtime error both fail it)
        return "error" in outcome
    return outcome in (f"value: {v!r}" for v in _truthy(case.expect_match))


def _truthy(expected: bool) -> list[Any]:
    try:
        from celpy import celtypes  # type: ignore[import-not-found]

        return [expected, celtypes.BoolType(expected)]
    except ImportError:
        return [expected]


# --- the driver -------------------------------------------------------------------------


def ensure_venv(name: str, requirement: str) -> Path:
    target = CACHE / "cel-scorecard" / name
    python = target / "bin" / "python"
    stamp = target / "installed.txt"
    if not (stamp.exists() and stamp.read_text() == requirement):
        print(f"[cel-scorecard] installing {requirement} into {target}", file=sys.stderr)
        venv.create(target, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
            check=True,
        )
        stamp.write_text(requirement)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="write the raw results to this file")
    args = parser.parse_args()
    cases = load_cases()
    if args.worker:
        results, micros = WORKERS[args.worker](cases)
        passed = {c.name: verdict(c, results[c.name]) for c in cases}
        print(json.dumps({"results": results, "passed": passed, "eval_us": micros}))
        return 0

    report: dict[str, Any] = {}
    for name, requirement in CANDIDATES.items():
        python = ensure_venv(name, requirement)
        print(f"[cel-scorecard] running {len(cases)} cases on {requirement}", file=sys.stderr)
        out = subprocess.run(
            [str(python), __file__, "--worker", name], check=True, capture_output=True, text=True
        )
        report[name] = json.loads(out.stdout)
    names = list(CANDIDATES)
    width = max(len(c.name) for c in cases)
    print(f"{'case':<{width}}  " + "  ".join(f"{n:<28}" for n in names))
    for case in cases:
        row = []
        for n in names:
            ok = report[n]["passed"][case.name]
            row.append(f"{'pass' if ok else 'FAIL':<4} {report[n]['results'][case.name][:22]:<23}")
        print(f"{case.name:<{width}}  " + "  ".join(row))
    print(
        f"{'passed':<{width}}  "
        + "  ".join(f"{sum(report[n]['passed'].values())}/{len(cases):<26}" for n in names)
    )
    print(
        f"{'one evaluation (us)':<{width}}  "
        + "  ".join(f"{report[n]['eval_us']:<28.1f}" for n in names)
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
