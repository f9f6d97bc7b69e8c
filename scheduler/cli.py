"""Command line: `kube-async-scheduler <command>`.

Flags follow kube-scheduler's where they overlap (--config, --kubeconfig, --leader-elect,
-v). Every expected failure ends with a one-line message on stderr and a non-zero exit
code, never a traceback: 2 for bad input (config, flags, node mix), 1 for a runtime
failure (a binary missing, a port taken, the cluster not starting)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from scheduler import __version__
from scheduler.features import FeatureGateError, FeatureGates, parse_feature_gates

EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2
DEFAULT_CLUSTER_DIR = ".cluster"


def fail(message: str, code: int) -> int:
    print(f"kube-async-scheduler: error: {message}", file=sys.stderr)
    return code


# The cluster and demo commands run the development package kas_dev, which sits beside
# scheduler/ in the repository and is in neither the wheel nor the image (pyproject.toml).
CHECKOUT_PACKAGE = "kas_dev"


def _import_from_checkout(module: str) -> ModuleType | None:
    """Import `module` of the development package, or None outside a checkout.

    From a checkout the package is importable when the repository root is on sys.path
    (PYTHONPATH=$PWD, `python -m`); the editable install maps only `scheduler`, so for
    `.venv/bin/kube-async-scheduler` the root is found next to this package instead. An
    installed wheel has no kas_dev beside it: None."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != CHECKOUT_PACKAGE:
            raise  # kas_dev is there but one of its own imports is missing
    root = Path(__file__).resolve().parent.parent
    if not (root / CHECKOUT_PACKAGE / "__init__.py").is_file():
        return None
    sys.path.insert(0, str(root))
    return importlib.import_module(module)


def _checkout_command(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand implemented in the development package, imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        try:
            found = _import_from_checkout(module)
        except ModuleNotFoundError as exc:
            return fail(
                f"the {args.command} command needs {exc.name}, an optional dependency: "
                "install the package with its 'local' extra (pip install -e '.[local]')",
                EXIT_RUNTIME,
            )
        if found is None:
            return fail(
                f"the cluster/demo commands need a checkout of the repository: {module} is "
                "development tooling that the wheel and the image do not ship",
                EXIT_BAD_INPUT,
            )
        command: Callable[[argparse.Namespace], int] = getattr(found, function)
        return command(args)

    return run


def _feature_gates(args: argparse.Namespace) -> FeatureGates | int:
    """--feature-gates read before anything else; a bad value is exit 2 naming the flag."""
    try:
        return parse_feature_gates(args.feature_gates or "")
    except FeatureGateError as exc:
        return fail(f"invalid argument for --feature-gates: {exc}", EXIT_BAD_INPUT)


def _check_config(path: str, features: FeatureGates) -> int | None:
    """Validate --config before the app is imported and anything connects: a bad file
    ends in exit 2 with one line naming the field. The catalog imports the plugin classes
    (they say which extension points they serve, which multiPoint's expansion needs), not
    the app. None when the file is valid."""
    from scheduler.catalog import load_config
    from scheduler.config import ConfigError

    try:
        load_config(path, features)
    except ConfigError as exc:
        print(f"kube-async-scheduler: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a loader bug: still one line, still "bad input", no traceback
        from scheduler.config.errors import one_line

        detail = one_line(f"{type(exc).__name__}: {exc}", 300)
        print(
            f"kube-async-scheduler: invalid configuration: {path}: cannot be read ({detail})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return None


def _run(args: argparse.Namespace) -> int:
    features = _feature_gates(args)
    if isinstance(features, int):
        return features
    if args.config:
        failed = _check_config(args.config, features)
        if failed is not None:
            return failed
    from scheduler.process import run_scheduler

    return run_scheduler(args, features)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-async-scheduler",
        description="A Kubernetes secondary scheduler with asynchronous preemption.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the scheduler (the main job)")
    run.add_argument(
        "--config", help="KubeSchedulerConfiguration YAML file (default: built-in defaults)"
    )
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    # serving, as kube-scheduler's secure serving and delegated auth flags (docs/security.md)
    run.add_argument(
        "--bind-address", default="0.0.0.0",
        help="address of the HTTPS port (/metrics, health, explain); default 0.0.0.0",
    )
    run.add_argument(
        "--secure-port", type=int, default=10259,
        help="the HTTPS port (0: any free port; the log names it)",
    )
    run.add_argument(
        "--cert-dir", default="",
        help="where a self-signed serving certificate is kept when no --tls-cert-file is "
        "given (default: generated in memory)",
    )
    run.add_argument("--tls-cert-file", default="", help="the serving certificate (PEM)")
    run.add_argument("--tls-private-key-file", default="", help="its private key (PEM)")
    run.add_argument(
        "--client-ca-file", default="",
        help="CA bundle for client certificates (default: the API server's, read from "
        "kube-system/extension-apiserver-authentication)",
    )  # fmt: skip
    run.add_argument(
        "--authorization-always-allow-paths", default="/healthz,/readyz,/livez",
        help="paths served to anyone, authenticated or not (comma-separated; a trailing * "
        "is a prefix)",
    )
    run.add_argument(
        "--authentication-token-webhook-cache-ttl", default="10s",
        help="how long TokenReview answers are cached",
    )
    run.add_argument(
        "--authorization-webhook-cache-authorized-ttl", default="10s",
        help="how long allowed SubjectAccessReview answers are cached",
    )
    run.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl", default="10s",
        help="how long denied SubjectAccessReview answers are cached",
    )  # fmt: skip
    le = run.add_mutually_exclusive_group()
    le.add_argument(
        "--leader-elect",
        dest="leader_elect",
        action="store_true",
        default=None,
        help="elect a leader through a Lease (overrides leaderElection.leaderElect)",
    )
    le.add_argument("--no-leader-elect", dest="leader_elect", action="store_false")
    run.add_argument(
        "--preemption-policies",
        action="store_true",
        help="reconcile PreemptionPolicy objects (scheduling.kas.io; the CRD must be installed)",
    )
    run.add_argument(
        "--feature-gates", default="",
        help="feature gates as kube-scheduler's flag (A=true,B=false); known: "
        "GenericWorkload (default false: workload-aware scheduling of pod groups), "
        "DynamicResourceAllocation (default false here: pods with resource claims)",
    )
    run.add_argument(
        "--write-config-to", help="write the effective configuration to this file and exit"
    )
    run.add_argument("-v", "--v", dest="verbosity", type=int, default=2, help="log verbosity 0-5")
    run.set_defaults(func=_run)

    demo = sub.add_parser(
        "demo",
        help="bring up a local cluster, run the scheduler and a demo workload (from a checkout)",
    )
    demo.add_argument("--dir", default=".cluster-demo", help="cluster directory")
    demo.add_argument(
        "--nodes", type=int, default=10, help="kwok nodes (a fifth of them tainted gpu nodes)"
    )
    demo.add_argument("--pods", type=int, default=300, help="pods in the mixed-constraints phase")
    demo.add_argument(
        "--preemptors", type=int, default=4, help="high-priority pods in the preemption phase"
    )
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.add_argument("-v", "--v", dest="verbosity", type=int, default=1)
    demo.set_defaults(func=_checkout_command("kas_dev.demo", "run_demo"))

    from scheduler.explain_cli import add_parser as add_explain

    add_explain(sub)

    cl = sub.add_parser(
        "cluster",
        help="a local control plane: etcd, kube-apiserver, controller manager, kwok "
        "(from a checkout)",
    )
    csub = cl.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a local cluster and create kwok nodes")
    up.add_argument("--dir", default=DEFAULT_CLUSTER_DIR, help="where the cluster keeps its files")
    up.add_argument(
        "--nodes", type=int, default=3, help="number of default kwok nodes (4 CPU, 16Gi, 110 pods)"
    )
    up.add_argument("--node-mix", help="YAML file describing node groups (overrides --nodes)")
    up.add_argument(
        "--apiserver-port", type=int, help="fixed port for kube-apiserver (default: a free one)"
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real node (containerd + kubelet, root only) and upstream "
        "kube-scheduler as the default scheduler: the local equivalent of kind",
    )
    up.add_argument(
        "--real-nodes", type=int, default=0, help="number of real nodes (implies --real-node)"
    )
    up.add_argument(
        "--generic-workload",
        action="store_true",
        help="serve the Workload and PodGroup API (scheduling.k8s.io/v1beta1, gangs): the "
        "GenericWorkload gate on kube-apiserver, the controller manager and upstream "
        "kube-scheduler",
    )
    up.add_argument(
        "--large",
        action="store_true",
        help="settings for a large cluster's worth of pods (150,000): a longer request "
        "timeout and a heap limit on kube-apiserver (docs/local-control-plane.md)",
    )
    up.set_defaults(func=_checkout_command("kas_dev.commands", "cluster_up"))
    status = csub.add_parser("status", help="show the cluster's processes")
    status.add_argument("--dir", default=DEFAULT_CLUSTER_DIR)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_checkout_command("kas_dev.commands", "cluster_status"))
    down = csub.add_parser("down", help="stop the cluster's processes")
    down.add_argument("--dir", default=DEFAULT_CLUSTER_DIR)
    down.add_argument("--purge", action="store_true", help="also remove the cluster's files")
    down.set_defaults(func=_checkout_command("kas_dev.commands", "cluster_down"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG
        if getattr(args, "verbosity", 2) >= 4
        else logging.INFO
        if getattr(args, "verbosity", 2) >= 1
        else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "nodes", 0) is not None and getattr(args, "nodes", 0) < 0:
        return fail("--nodes must be >= 0", EXIT_BAD_INPUT)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
