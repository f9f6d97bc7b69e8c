"""A real Prometheus beside the local cluster, scraping the scheduler as the chart's
ServiceMonitor says, and the check that every panel of the chart's dashboard answers.

There is no Prometheus Operator here, so the ServiceMonitor the chart renders is turned
into its static equivalent: the operator names the job after the Service, scrapes the
endpoints' `https` port at the given path, scheme, interval and timeout, with the
given token and TLS settings; with host networking the endpoint is
127.0.0.1:<server.securePort>, so that is the static target.
Prometheus itself listens on 127.0.0.1 only and keeps its data in the cluster directory;
its pid is tracked with the cluster's, so `cluster down` stops it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kas_dev.cluster import process
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.ports import LOOPBACK, free_port

if TYPE_CHECKING:
    from kas_dev.cluster.local import LocalCluster

NAME = "prometheus"


def scrape_config(
    service_monitor: dict[str, Any],
    service_name: str,
    targets: Iterable[str],
    *,
    token_file: Path | None = None,
) -> list[dict[str, Any]]:
    """The static scrape configs equivalent to a ServiceMonitor's endpoints, for the
    given Service and its (loopback) targets. An endpoint's bearerTokenFile is a path in
    Prometheus' pod (its ServiceAccount token): here `token_file` holds that token; its
    tlsConfig's insecureSkipVerify and serverName carry over."""
    if service_monitor.get("kind") != "ServiceMonitor":
        raise ClusterError(f"not a ServiceMonitor: {service_monitor.get('kind')!r}")
    out = []
    for i, ep in enumerate(service_monitor["spec"]["endpoints"]):
        if ep.get("relabelings") or ep.get("metricRelabelings"):
            # the operator's camelCase relabelings would need translating; not needed here
            raise ClusterError("relabelings are not translated to a static scrape config")
        cfg: dict[str, Any] = {
            "job_name": service_name if i == 0 else f"{service_name}-{i}",
            "metrics_path": ep.get("path", "/metrics"),
            "scheme": ep.get("scheme", "http"),
            "static_configs": [
                # the labels the operator's Service discovery adds and dashboards select on
                {"targets": list(targets), "labels": {"job": service_name}}
            ],
        }
        if ep.get("bearerTokenFile"):
            if token_file is None:
                raise ClusterError("the ServiceMonitor scrapes with a token: give token_file")
            cfg["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
        tls = ep.get("tlsConfig") or {}
        tls_config = {
            key: tls[src]
            for src, key in (("insecureSkipVerify", "insecure_skip_verify"),
                             ("serverName", "server_name"))
            if src in tls
        }  # fmt: skip
        if tls_config:
            cfg["tls_config"] = tls_config
        if "interval" in ep:
            cfg["scrape_interval"] = ep["interval"]
        if "scrapeTimeout" in ep:
            cfg["scrape_timeout"] = ep["scrapeTimeout"]
        out.append(cfg)
    return out


def start(cluster: LocalCluster, scrape_configs: list[dict[str, Any]]) -> str:
    """Start Prometheus for this cluster; returns its base URL once it is ready."""
    assert cluster.state is not None
    binary = Path(cluster.state.bin_dir) / "prometheus"
    if not os.access(binary, os.X_OK):
        raise ClusterError(
            f"prometheus not found in {cluster.state.bin_dir} "
            "(run 'hack/install-binaries.sh realnode')"
        )
    d = cluster.dir / "prometheus"
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "prometheus.yml"
    cfg.write_text(
        yaml.safe_dump({"global": {"evaluation_interval": "15s"}, "scrape_configs": scrape_configs})
    )
    port = free_port()
    cluster.state.ports[NAME] = port
    argv = [
        str(binary),
        f"--config.file={cfg}",
        f"--storage.tsdb.path={d / 'data'}",
        f"--web.listen-address={LOOPBACK}:{port}",
        "--storage.tsdb.retention.time=1d",
        "--log.level=warn",
    ]
    pid = process.start(NAME, argv, cluster.log_dir)
    cluster.state.pids[NAME] = pid
    cluster.state.binaries[NAME] = str(binary)
    cluster.state.started.append((NAME, pid))
    cluster._save_state()
    url = f"http://{LOOPBACK}:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not process.is_running(pid, str(binary)):
            raise ClusterError(
                f"prometheus exited during start: {process.last_log_line(cluster.log_dir, NAME)}"
            )
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return url
        except OSError:
            pass
        time.sleep(0.2)
    raise ClusterError("prometheus not ready after 60s")


def stop(cluster: LocalCluster) -> None:
    st = cluster.state
    if st is not None and st.pids.get(NAME):
        process.stop(st.pids[NAME], st.binaries.get(NAME), timeout=20.0)


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query; the result vector (or matrix/scalar as a list)."""
    q = urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
            body = json.loads(r.read())
    except urllib.error.HTTPError as exc:  # a bad query answers 400 with the reason
        body = json.loads(exc.read() or b"{}")
    if body.get("status") != "success":
        raise ClusterError(f"query {promql!r} failed: {body.get('error')}")
    result = body["data"]["result"]
    return result if isinstance(result, list) else [result]


def targets(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=10) as r:
        return list(json.loads(r.read())["data"]["activeTargets"])


def dashboard_queries(dashboard: dict[str, Any], job: str) -> dict[str, str]:
    """Every panel target's PromQL, with the dashboard's variables filled in as Grafana
    would for this job: $job is the job (a regex match of a plain name: Grafana puts the
    value in as is), $profile matches all, $__rate_interval is one minute."""
    out: dict[str, str] = {}

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                expr = t.get("expr")
                if not expr:
                    continue
                filled = (
                    expr.replace("$__rate_interval", "1m")
                    .replace("$job", job)
                    .replace("$profile", ".*")
                )
                out[f"{p.get('title', '?')} [{t.get('refId', '?')}]"] = filled

    walk(dashboard.get("panels", []))
    return out


def panels_without_data(url: str, dashboard: dict[str, Any], job: str) -> dict[str, str]:
    """The panels whose query returns no series (title -> query); empty means all answer."""
    return {
        title: expr
        for title, expr in dashboard_queries(dashboard, job).items()
        if not query(url, expr)
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m kas_dev.cluster.prometheus start|query ...` for hack/kind-local.sh."""
    import argparse
    import sys

    from kas_dev.cluster.local import LocalCluster

    ap = argparse.ArgumentParser(prog="python -m kas_dev.cluster.prometheus")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start", help="start Prometheus scraping as a ServiceMonitor says")
    st.add_argument("--dir", default=".cluster", help="the cluster directory")
    st.add_argument("--service-monitor", type=Path, required=True, help="rendered YAML")
    st.add_argument("--service", required=True, help="the Service it selects (the job)")
    st.add_argument("--target", action="append", required=True, help="host:port to scrape")
    st.add_argument(
        "--token-file", type=Path, help="the token the ServiceMonitor's bearerTokenFile names"
    )
    q = sub.add_parser("query", help="an instant query, printed as JSON")
    q.add_argument("--dir", default=".cluster")
    q.add_argument("promql")
    args = ap.parse_args(argv)
    cluster = LocalCluster(args.dir)
    try:
        if args.cmd == "start":
            sm = yaml.safe_load(args.service_monitor.read_text())
            scrape = scrape_config(sm, args.service, args.target, token_file=args.token_file)
            url = start(cluster, scrape)
            print(url)
        else:
            if cluster.state is None or NAME not in cluster.state.ports:
                raise ClusterError(f"no Prometheus in {args.dir}")
            url = f"http://{LOOPBACK}:{cluster.state.ports[NAME]}"
            print(json.dumps(query(url, args.promql), indent=1))
    except (ClusterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
