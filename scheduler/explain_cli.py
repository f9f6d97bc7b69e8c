"""`kube-async-scheduler explain NAMESPACE/POD`: ask a running scheduler why a pod is
pending and what it would do now (scheduler.explain serves the answer).

The scheduler is reached over plain HTTP on its metrics port: `--url` (a local
scheduler: http://127.0.0.1:10251), else the chart's Service in-cluster
(http://kube-async-scheduler-metrics.kube-async-scheduler.svc:10251, overridable by
$KAS_SCHEDULER_URL). Prints a table, or the JSON answer with `-o json`. Imports nothing
of the runtime: it starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["DEFAULT_URL", "format_table", "run_explain"]

DEFAULT_URL = "http://kube-async-scheduler-metrics.kube-async-scheduler.svc:10251"
EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in
              enumerate(headers)]  # fmt: skip
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return [line.format(*headers).rstrip(), *(line.format(*r).rstrip() for r in rows)]


def _node_rows(nodes: list[dict[str, Any]]) -> list[list[str]]:
    return [[n["node"], n["code"], n["plugin"] or "-", n["reason"] or "-"] for n in nodes]


def format_table(body: dict[str, Any]) -> str:
    out = [
        f"Pod:           {body['pod']} (priority {body['priority']},"
        f" scheduler {body['schedulerName']})",
        f"Queue:         {body.get('queue') or '-'}",
        f"Nominated:     {body.get('nominatedNode') or '-'}",
    ]
    if not body.get("leader", True):
        out.append("Note:          a follower answered: it makes no attempts; ask the leader")
    if body.get("schedulingGates"):
        out.append(f"Gates:         {', '.join(body['schedulingGates'])}")
    last = body.get("lastAttempt")
    out.append("")
    if last is None:
        out.append("Last attempt:  none recorded")
    else:
        out.append(f"Last attempt:  {last['time']}: {last['message']}")
        if "nodes" in last:  # per-node lists come only when asked for (nodes=true)
            out += ["  " + r for r in _table(["NODE", "CODE", "PLUGIN", "REASON"],
                                               _node_rows(last["nodes"]))]  # fmt: skip
    now = body.get("now") or {}
    out.append("")
    if now.get("result") == "Schedulable":
        out.append(f"Now:           schedulable on node {now['node']}")
        return "\n".join(out)
    out.append(f"Now:           {now.get('result', '-')}: {now.get('message', '')}")
    plan = now.get("preemption")
    if plan is None:
        out.append("Preemption:    not configured for this profile")
    elif plan.get("node"):
        count = plan.get("victimCount", len(plan["victims"]))
        out.append(f"Preemption:    on node {plan['node']}, {count} victim(s)")
        out += ["  " + r for r in _table(["VICTIM", "PRIORITY"],
                                           [[v["pod"], str(v["priority"])]
                                            for v in plan["victims"]])]  # fmt: skip
        if plan.get("hiddenVictims"):
            out.append(f"  and {plan['hiddenVictims']} in namespace(s) you may not read")
    else:
        out.append(f"Preemption:    none: {plan.get('message') or '-'}")
    if plan is not None:
        out.append(f"Policies:      {', '.join(plan.get('policies') or []) or '-'}")
    return "\n".join(out)


def run_explain(args: argparse.Namespace) -> int:
    target = args.pod
    if target.count("/") != 1 or not all(target.split("/")):
        print("kube-async-scheduler: error: expected NAMESPACE/POD", file=sys.stderr)
        return EXIT_BAD_INPUT
    ns, name = target.split("/")
    base = (args.url or os.environ.get("KAS_SCHEDULER_URL") or DEFAULT_URL).rstrip("/")
    url = f"{base}/explain/{urllib.parse.quote(ns)}/{urllib.parse.quote(name)}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as r:
            body = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            detail = exc.reason
        print(f"kube-async-scheduler: error: {detail}", file=sys.stderr)
        return EXIT_BAD_INPUT if exc.code in (404, 409) else EXIT_RUNTIME
    except (OSError, ValueError) as exc:
        print(f"kube-async-scheduler: error: cannot reach the scheduler at {base}: {exc}",
              file=sys.stderr)  # fmt: skip
        return EXIT_RUNTIME
    if args.output == "json":
        print(json.dumps(body, indent=2))
    else:
        print(format_table(body))
    return 0


def add_parser(sub: Any) -> None:
    ex = sub.add_parser("explain", help="why a pod is pending, and what the scheduler would do now")
    ex.add_argument("pod", help="NAMESPACE/POD")
    ex.add_argument(
        "--url",
        help=f"the scheduler's HTTP address (default: $KAS_SCHEDULER_URL, else {DEFAULT_URL})",
    )
    ex.add_argument("-o", "--output", choices=["table", "json"], default="table")
    ex.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer")
    ex.set_defaults(func=run_explain)
