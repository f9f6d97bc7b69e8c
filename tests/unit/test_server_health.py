"""scheduler.server: /healthz /livez /readyz checks and /metrics, on a real TLS socket:
health open to anyone with reasons withheld (and logged), /metrics for the admin."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from kas_dev.cluster.scheduler_https import serving_ca
from scheduler.server import HealthServer
from tests.unit.helpers.serving import Served, make_served

_SERVED: dict[int, Served] = {}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[HealthServer]:
    registry = CollectorRegistry()
    Counter("demo_total", "A demo counter.", registry=registry).inc(3)
    served = make_served(tmp_path, registry)
    _SERVED[id(served.server)] = served
    await served.server.start()
    yield served.server
    await served.server.stop()


async def get(srv: HealthServer, path: str) -> tuple[int, str, str]:
    """Anonymous on the health paths; with the admin client certificate elsewhere."""
    served = _SERVED[id(srv)]
    ctx = ssl.create_default_context(cafile=str(serving_ca(served.cert_dir)))
    if path.split("?")[0] not in ("/healthz", "/livez", "/readyz"):
        ctx.load_cert_chain(str(served.admin.cert), str(served.admin.key))
    async with aiohttp.ClientSession() as session, session.get(srv.url + path, ssl=ctx) as resp:
        return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


async def test_port_zero_binds_a_free_port(server: HealthServer) -> None:
    assert server.port > 0


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_everything_is_ok_with_no_failing_checks(server: HealthServer, path: str) -> None:
    assert (await get(server, path))[:2] == (200, "ok")


async def test_readyz_names_the_failing_readiness_check(server: HealthServer) -> None:
    synced = False
    server.add_readiness_check(
        "sched-handler-sync", lambda: None if synced else "waiting for handlers to sync"
    )
    status, body, _ = await get(server, "/readyz")
    assert status == 500
    assert "[-]sched-handler-sync failed: reason withheld" in body
    assert "waiting for handlers" not in body
    assert body.rstrip().endswith("readyz check failed")
    assert (await get(server, "/healthz"))[0] == 200  # readiness is not health
    synced = True
    assert (await get(server, "/readyz"))[:2] == (200, "ok")


async def test_a_failing_health_check_fails_healthz_livez_and_readyz(
    server: HealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add_health_check("leaderElection", lambda: "failed election to renew leadership")
    caplog.set_level(logging.INFO, logger="scheduler.server")
    for path in ("/healthz", "/livez", "/readyz"):
        status, body, _ = await get(server, path)
        assert status == 500, path
        # the body is public: the reason is withheld there, and logged (healthz.go)
        assert "[-]leaderElection failed: reason withheld" in body
        assert "renew leadership" not in body
    assert "[-]leaderElection failed: failed election to renew leadership" in caplog.text
    status, body, _ = await get(server, "/healthz?verbose")
    assert status == 500 and "renew leadership" not in body


async def test_shutdown_makes_readyz_fail_but_not_healthz(server: HealthServer) -> None:
    server.begin_shutdown()
    status, body, _ = await get(server, "/readyz")
    assert status == 500
    assert "[-]shutdown failed" in body
    assert (await get(server, "/healthz"))[0] == 200


async def test_a_raising_check_counts_as_failing(server: HealthServer) -> None:
    def broken() -> str | None:
        raise RuntimeError("bug")

    server.add_health_check("broken", broken)
    status, body, _ = await get(server, "/healthz")
    assert status == 500 and "[-]broken failed" in body


async def test_verbose_lists_every_check(server: HealthServer) -> None:
    server.add_readiness_check("informers", lambda: None)
    status, body, _ = await get(server, "/readyz?verbose")
    assert status == 200
    assert body.splitlines() == [
        "[+]ping ok",
        "[+]informers ok",
        "[+]shutdown ok",
        "readyz check passed",
    ]


async def test_metrics_exposes_the_given_registry(server: HealthServer) -> None:
    status, body, content_type = await get(server, "/metrics")
    assert status == 200
    assert "demo_total 3.0" in body
    assert content_type.startswith("text/plain")


def test_duplicate_check_names_are_refused(tmp_path: Path) -> None:
    srv = make_served(tmp_path).server
    srv.add_health_check("a", lambda: None)
    with pytest.raises(ValueError):
        srv.add_readiness_check("a", lambda: None)


async def test_start_twice_is_refused_and_stop_is_idempotent(tmp_path: Path) -> None:
    srv = make_served(tmp_path).server
    await srv.start()
    with pytest.raises(RuntimeError):
        await srv.start()
    await srv.stop()
    await srv.stop()
    with pytest.raises(RuntimeError):
        _ = srv.port
