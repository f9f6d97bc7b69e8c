"""`kube-async-scheduler explain NAMESPACE/POD`: ask a running scheduler why a pod is
pending and what it would do now (scheduler.explain serves the answer).

By default the question goes to the API server, with the user's kubeconfig (any of its
credentials: client certificate, token, exec plugin; `--kubeconfig`, `--context`), as
`GET /apis/explain.kas.io/v1alpha1/namespaces/NS/pods/POD`: the chart registers the
scheduler as that aggregated API, so the API server authenticates the user and forwards
the request with the user's identity, and the scheduler answers only if that user may
`get pods` in NS (docs/security.md). `--url` (or $KAS_SCHEDULER_URL) talks to a
scheduler's HTTPS port directly instead, with `--token`/`--token-file` or
`--client-certificate`/`--client-key`, verifying its certificate against
`--certificate-authority` (or not at all with `--insecure-skip-tls-verify`).
Prints a table, or the JSON answer with `-o json`; for a member of a PodGroup
(GenericWorkload) both carry the group's section (`podGroup`). The runtime (the API
client) is imported only for the API-server path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["explain_api_path", "format_table", "run_explain"]

# scheduler.serving.aggregated's group and version (not imported: the CLI stays light)
EXPLAIN_API = "/apis/explain.kas.io/v1alpha1"
EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in
              enumerate(headers)]  # fmt: skip
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return [line.format(*headers).rstrip(), *(line.format(*r).rstrip() for r in rows)]


def _node_rows(nodes: list[dict[str, Any]]) -> list[list[str]]:
    return [[n["node"], n["code"], n["plugin"] or "-", n["reason"] or "-"] for n in nodes]


def _device_lines(nodes: list[dict[str, Any]]) -> list[str]:
    """DynamicResources' account per node and request (nodes=true), when it has one."""
    rows = []
    for n in nodes:
        for d in n.get("devices") or []:
            if d.get("allocatedElsewhere"):
                rows.append([n["node"], d["claim"], "-", "-", "-", "-", "-", "-",
                             "allocated on other nodes"])  # fmt: skip
                continue
            rows.append([
                n["node"], d.get("claim", "-"), d.get("request", "-"), d.get("wanted", "-"),
                str(d.get("free", "-")), str(d.get("inUse", "-")), str(d.get("tainted", "-")),
                str(d.get("notSelected", "-")), d.get("problem") or "-",
            ])  # fmt: skip
    if not rows:
        return []
    headers = ["NODE", "CLAIM", "REQUEST", "WANTED", "FREE", "IN USE", "TAINTED",
               "NOT SELECTED", "PROBLEM"]  # fmt: skip
    return ["Devices:", *("  " + r for r in _table(headers, rows))]


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
    else:
        out.append(f"Now:           {now.get('result', '-')}: {now.get('message', '')}")
    out += _device_lines(now.get("nodes") or [])
    group = body.get("podGroup")
    if group is not None:
        # a gang member: its group is what is tried, and preempted for (no PostFilter
        # of its own)
        return "\n".join([*out, "", *_group_lines(group)])
    if now.get("result") == "Schedulable":
        return "\n".join(out)
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


def _group_lines(group: dict[str, Any]) -> list[str]:
    """The `podGroup` section: the PodGroup, its members, PreEnqueue, the group's dry run."""
    if group.get("found"):
        head = (
            f"{group['policy']}, minCount {group['minCount']}, disruption "
            f"{group['disruptionMode']}, priority {group['priority']}"
        )
    else:
        head = "PodGroup not found"
    out = [
        f"Pod group:     {group['name']} ({head})",
        f"Members:       {group['membersKnown']} known, {group['membersScheduled']} scheduled",
    ]
    gate = group.get("preEnqueue") or {}
    held = f"held by GangScheduling: {gate.get('message')}" if gate.get("held") else "not held"
    out.append(f"PreEnqueue:    {held}")
    members = group.get("members") or []
    if members:
        rows = [[m["pod"], m.get("queue") or "-"] for m in members]
        out += ["  " + r for r in _table(["MEMBER", "QUEUE"], rows)]
    now = group.get("now") or {}
    out.append(f"Group now:     {now.get('result', '-')}: {now.get('message') or '-'}")
    if now.get("result") == "Gated":
        return out
    reached = "reached" if now.get("reachesMinCount") else "not reached"
    out.append(f"minCount:      {reached}")
    placements = now.get("placements") or []
    if placements:
        rows = [[p["pod"], p.get("node") or "-", p.get("reason") or "-"] for p in placements]
        out += ["  " + r for r in _table(["MEMBER", "NODE", "REASON"], rows)]
    plan = now.get("preemption")
    if plan is None:
        return out
    if plan.get("code") != "Success":
        out.append(f"Preemption:    none: {plan.get('message') or '-'}")
        return out
    nodes = plan.get("nodes") or []
    out.append(f"Preemption:    {plan['victimCount']} victim(s) on {len(nodes)} node(s)")
    rows = [[n["node"], v["pod"], str(v["priority"])] for n in nodes for v in n["victims"]]
    if rows:
        out += ["  " + r for r in _table(["NODE", "VICTIM", "PRIORITY"], rows)]
    if plan.get("hiddenVictims"):
        out.append(f"  and {plan['hiddenVictims']} in namespace(s) you may not read")
    nominated = ", ".join(f"{n['pod']} -> {n['node']}" for n in plan.get("nominations") or [])
    if nominated:
        out.append(f"Nominations:   {nominated}")
    return out


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def explain_api_path(namespace: str, name: str) -> str:
    return f"{EXPLAIN_API}/namespaces/{_quote(namespace)}/pods/{_quote(name)}"


def _error_detail(status: int, raw: bytes | str | dict[str, Any] | None, fallback: str) -> str:
    """The message of a Status (the API server's, or ours) or of explain's {"error": ...}."""
    body: Any = raw
    if isinstance(raw, bytes | str):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    if isinstance(body, dict):
        for key in ("message", "error"):
            if body.get(key):
                return str(body[key])
    return fallback or f"HTTP {status}"


def _exit_code(status: int) -> int:
    # a pod that does not exist or is not pending, or a refusal: the input is the problem
    return EXIT_BAD_INPUT if status in (401, 403, 404, 409) else EXIT_RUNTIME


async def _via_api_server(args: argparse.Namespace, ns: str, name: str) -> dict[str, Any]:
    from scheduler.client.connection import Connection

    connection = await Connection.from_kubeconfig(
        args.kubeconfig,
        context=args.context,
        max_connections=1,
        user_agent="kube-async-scheduler/explain",
    )
    async with connection:
        return await connection.request(
            "GET", explain_api_path(ns, name), request_timeout=args.timeout
        )


def _ssl_context(args: argparse.Namespace) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=args.certificate_authority or None)
    if args.insecure_skip_tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if args.client_certificate:
        ctx.load_cert_chain(args.client_certificate, args.client_key or None)
    return ctx


def _via_url(args: argparse.Namespace, base: str, ns: str, name: str) -> dict[str, Any]:
    """GET <base>/explain/NS/POD over HTTPS with the given credentials."""
    request = urllib.request.Request(f"{base.rstrip('/')}/explain/{_quote(ns)}/{_quote(name)}")
    token = args.token
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=args.timeout, context=_ssl_context(args)) as r:
        body: dict[str, Any] = json.loads(r.read())
    return body


def run_explain(args: argparse.Namespace) -> int:
    target = args.pod
    if target.count("/") != 1 or not all(target.split("/")):
        print("kube-async-scheduler: error: expected NAMESPACE/POD", file=sys.stderr)
        return EXIT_BAD_INPUT
    ns, name = target.split("/")
    url = args.url or os.environ.get("KAS_SCHEDULER_URL")
    if url and not url.startswith("https://"):
        print(f"kube-async-scheduler: error: --url must be https:// (got {url})", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        body = (
            _via_url(args, url, ns, name) if url else asyncio.run(_via_api_server(args, ns, name))
        )
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc.code, exc.read(), str(exc.reason))
        print(f"kube-async-scheduler: error: {detail}", file=sys.stderr)
        return _exit_code(exc.code)
    except Exception as exc:  # the API client's ApiError carries the status; else unreachable
        status = getattr(exc, "status", 0)
        if isinstance(status, int) and status:
            detail = _error_detail(status, getattr(exc, "body", None), str(exc))
            print(f"kube-async-scheduler: error: {detail}", file=sys.stderr)
            return _exit_code(status)
        where = url or "the API server"
        print(f"kube-async-scheduler: error: cannot reach {where}: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    if args.output == "json":
        print(json.dumps(body, indent=2))
    else:
        print(format_table(body))
    return 0


def add_parser(sub: Any) -> None:
    ex = sub.add_parser("explain", help="why a pod is pending, and what the scheduler would do now")
    ex.add_argument("pod", help="NAMESPACE/POD")
    ex.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    ex.add_argument("--context", help="the kubeconfig context to use (default: its current one)")
    direct = ex.add_argument_group("direct", "ask one scheduler's HTTPS port, not the API server")
    direct.add_argument(
        "--url", help="the scheduler's address, https://HOST:PORT (default: $KAS_SCHEDULER_URL)"
    )
    direct.add_argument("--token", help="a bearer token for --url")
    direct.add_argument("--token-file", help="a file holding a bearer token for --url")
    direct.add_argument("--client-certificate", help="a client certificate (PEM) for --url")
    direct.add_argument("--client-key", help="its private key (PEM)")
    direct.add_argument("--certificate-authority", help="the CA of the scheduler's certificate")
    direct.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the scheduler's certificate (its default one is self-signed)",
    )
    ex.add_argument("-o", "--output", choices=["table", "json"], default="table")
    ex.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer")
    ex.set_defaults(func=run_explain)
