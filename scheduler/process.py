"""The scheduler process's entry: read the configuration (exit 2 on any problem, before
touching the cluster), open the connections (one of its own for leader election, as
upstream's separate leader-election clientset), run the SchedulerApp until it stops,
close the connections.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
from collections.abc import Callable

from scheduler.app import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_RUNTIME,
    RunOptions,
    SchedulerApp,
)
from scheduler.catalog import default_config, load_config
from scheduler.client.connection import Connection, ConnectionSettings
from scheduler.collector import StartupPause, tune_gc
from scheduler.config import ConfigError, SchedulerConfiguration, write_config
from scheduler.features import FeatureGates
from scheduler.server import DelegationOptions, ServingOptions
from scheduler.serving.authn_config import ClientCA
from scheduler.serving.certs import CertError, ServingCert, serving_cert
from scheduler.serving.flags import parse_duration, parse_paths

_NO_GATES = FeatureGates()


def load_or_exit(
    path: str | None, features: FeatureGates = _NO_GATES
) -> SchedulerConfiguration | int:
    try:
        return load_config(path, features) if path else default_config(features)
    except ConfigError as exc:
        print(f"kube-async-scheduler: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(
            f"kube-async-scheduler: cannot read configuration {path}: {exc.strerror}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


async def _amain(cfg: SchedulerConfiguration, options: RunOptions) -> int:
    kubeconfig = options.kubeconfig or cfg.client_connection.kubeconfig or None
    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    leader_elect = (
        cfg.leader_election.leader_elect if options.leader_elect is None else options.leader_elect
    )
    connections: list[Connection] = []
    try:
        try:
            connections.append(
                await Connection.connect(
                    ConnectionSettings(kubeconfig=kubeconfig, in_cluster=in_cluster)
                )
            )
            if leader_elect:
                # its own session and pool, as upstream's leader-election clientset
                connections.append(
                    await Connection.connect(
                        ConnectionSettings(
                            kubeconfig=kubeconfig,
                            in_cluster=in_cluster,
                            max_connections=4,
                            user_agent="kube-async-scheduler/leader-election",
                        )
                    )
                )
        except Exception as exc:  # unreadable kubeconfig, no in-cluster env, ...
            print(f"kube-async-scheduler: cannot connect to the API server: {exc}", file=sys.stderr)
            return EXIT_RUNTIME
        # the collector off while the caches first fill (scheduler/collector.py)
        pause = StartupPause()
        app = SchedulerApp(
            cfg,
            connections[0],
            dataclasses.replace(options, on_caches_synced=pause.settle),
            lease_connection=connections[1] if len(connections) > 1 else None,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, app.request_stop)
        pause.begin()
        expiry = asyncio.create_task(pause.expire())
        try:
            return await app.run()
        finally:
            expiry.cancel()
            pause.resume()
    finally:
        for connection in connections:
            await connection.close()


def serving_options(
    args: argparse.Namespace,
) -> tuple[ServingOptions, ServingCert, DelegationOptions] | int:
    """The serving flags checked, and the serving certificate read or made, before the
    cluster is touched: a bad value exits 2 with one line naming the flag."""

    def bad(flag: str, why: object) -> int:
        print(f"kube-async-scheduler: invalid flag --{flag}: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT

    if not 0 <= args.secure_port <= 65535:
        return bad("secure-port", f"{args.secure_port} is not a port (0-65535)")
    ttls: dict[str, float] = {}
    for flag in (
        "authentication-token-webhook-cache-ttl",
        "authorization-webhook-cache-authorized-ttl",
        "authorization-webhook-cache-unauthorized-ttl",
    ):
        try:
            ttls[flag] = parse_duration(getattr(args, flag.replace("-", "_")))
        except ValueError as exc:
            return bad(flag, exc)
    try:
        paths = parse_paths(args.authorization_always_allow_paths)
    except ValueError as exc:
        return bad("authorization-always-allow-paths", exc)
    client_ca = None
    if args.client_ca_file:
        try:
            client_ca = ClientCA.from_file(args.client_ca_file)
        except (OSError, ValueError) as exc:
            return bad("client-ca-file", f"{args.client_ca_file}: {exc}")
    try:
        cert = serving_cert(
            cert_file=args.tls_cert_file,
            key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir,
            bind_address=args.bind_address,
        )
    except CertError as exc:
        print(f"kube-async-scheduler: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return (
        ServingOptions(
            bind_address=args.bind_address,
            secure_port=args.secure_port,
            always_allow_paths=paths,
        ),
        cert,
        DelegationOptions(
            token_cache_ttl=ttls["authentication-token-webhook-cache-ttl"],
            authorized_ttl=ttls["authorization-webhook-cache-authorized-ttl"],
            unauthorized_ttl=ttls["authorization-webhook-cache-unauthorized-ttl"],
            client_ca=client_ca,
        ),
    )


def run_scheduler(args: argparse.Namespace, features: FeatureGates = _NO_GATES) -> int:
    loaded = load_or_exit(args.config, features)
    if isinstance(loaded, int):
        return loaded
    cfg = loaded
    if args.write_config_to:
        write_config(cfg, args.write_config_to)
        return EXIT_OK
    serving = serving_options(args)
    if isinstance(serving, int):
        return serving
    options = RunOptions(
        kubeconfig=args.kubeconfig,
        serving=serving[0],
        serving_cert=serving[1],
        delegation=serving[2],
        leader_elect=args.leader_elect,
        preemption_policies=bool(getattr(args, "preemption_policies", False)),
        features=features,
    )
    tune_gc()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(_amain(cfg, options))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (a dependency except on Windows), else
    None: asyncio's own. The scheduler is one thread whose every watch event, bind and
    Event write goes through the loop's transports: with uvloop's (libuv, TLS in C) a
    write cost 150-175 instead of 220-310 us CPU in a microbenchmark against the local
    apiserver. `KAS_EVENT_LOOP=asyncio` keeps asyncio's loop (to compare, or to rule
    uvloop out when chasing a problem)."""
    if os.environ.get("KAS_EVENT_LOOP") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
