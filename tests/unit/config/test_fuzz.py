"""Property-based fuzzing of the configuration loader (hypothesis, derandomized).

For any input - bytes, YAML-ish text, or a valid configuration with one part replaced by an
arbitrary value - the loader either returns a configuration or raises ConfigError with a
one-line message; nothing else. And whatever it accepts can run: every profile builds its
framework and schedules a pod, weights and lease timings stay within what the runtime's
arithmetic holds, and the effective configuration dumps and loads back equal.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import catalog
from scheduler.algorithm import schedule_pod
from scheduler.cache import Nominator
from scheduler.catalog import config_from_bytes, config_from_yaml, default_config
from scheduler.config import ConfigError, SchedulerConfiguration, dump_config, names
from scheduler.framework import CycleState, FitError, Framework, ScheduleResult
from scheduler.framework.registry import Registry
from scheduler.preemption import default_preemption
from tests.config_corpus import FULL, _parse_path, _walk
from tests.unit.helpers.builders import make_node, make_pod, make_snapshot

FUZZ = settings(
    max_examples=150,
    derandomize=True,  # the same examples every run: a failure is reproducible, CI is stable
    deadline=None,  # timing is checked elsewhere; a loaded machine must not fail this
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INT32_MAX = (1 << 31) - 1


def _load(data: bytes) -> SchedulerConfiguration | ConfigError:
    try:
        return config_from_bytes(data)
    except ConfigError as e:
        msg = str(e)
        assert "\n" not in msg and msg.isprintable(), repr(msg)
        assert len(msg) <= 620
        return e


@FUZZ
@given(st.binary(max_size=3000))
def test_any_bytes(data: bytes) -> None:
    _load(data)


YAMLISH = st.text(
    alphabet=st.sampled_from(list("{}[]:,-?&*!|>'\"%@`#~<\n\t aAz09._/\\\x00\u00e9\ufeff")),
    max_size=400,
)


@FUZZ
@given(YAMLISH)
def test_yaml_shaped_text(text: str) -> None:
    _load(text.encode("utf-8", "surrogatepass"))
    _load(("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
           + text).encode())  # fmt: skip


PLAUSIBLE_STRINGS = ["15s", "0s", "-1s", "1h", "2562047h", "leases", "cpu", "In", "Sync",
                     "ImageLocality", "NodeResourcesFit", "*", "List", "", "1", "true"]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(PLAUSIBLE_STRINGS),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
PATHS = [path for path, _ in _walk(FULL) if path]


def _replace(doc: Any, path: tuple[str | int, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return out


def _dump(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8", "surrogatepass")


def _registry(cfg: SchedulerConfiguration) -> Registry:
    services = default_preemption.PreemptionServices(
        executor=None,  # type: ignore[arg-type]  # never reached: no PostFilter runs here
        own_schedulers=cfg.scheduler_names,
        pod_lookup=lambda *_: None,  # type: ignore[arg-type,return-value]
    )
    return catalog.registry(services)


def assert_runs(cfg: SchedulerConfiguration) -> None:
    """What the process does with an accepted configuration, minus the cluster."""

    le = cfg.leader_election
    if le.leader_elect:
        assert 1 <= le.lease_duration <= INT32_MAX
        assert 0 < le.retry_period * 1.2 < le.renew_deadline < le.lease_duration
    assert math.isfinite(cfg.client_connection.qps)
    assert 0 < cfg.client_connection.burst <= INT32_MAX
    assert 0 < cfg.pod_initial_backoff_seconds <= cfg.pod_max_backoff_seconds < 1 << 63
    nodes = [make_node(f"n{i}").label("zone", "a" if i else "b") for i in range(3)]
    snapshot = make_snapshot(nodes)
    for i, profile in enumerate(cfg.profiles):
        weights = [r.weight for r in profile.enabled(names.SCORE)]
        assert all(0 < w <= INT32_MAX for w in weights)
        assert sum(weights) * 100 < 1 << 63
        fw = Framework(cfg.profiles[i], _registry(cfg))
        pod = make_pod("p").requests(cpu="100m").obj()
        result = schedule_pod(fw, CycleState(), pod, snapshot, Nominator())
        assert isinstance(result, ScheduleResult | FitError)
    again = config_from_yaml(dump_config(cfg))
    assert again == cfg


@FUZZ
@given(st.sampled_from(PATHS), VALUES)
def test_one_part_of_a_valid_config_replaced(path: tuple[str | int, ...], value: Any) -> None:
    loaded = _load(_dump(_replace(FULL, path, value)))
    if isinstance(loaded, SchedulerConfiguration):
        assert_runs(loaded)


@FUZZ
@given(st.sampled_from([p for p, v in _walk(FULL) if isinstance(v, dict)]), st.text(max_size=20))
def test_an_extra_field_anywhere_is_unknown(path: tuple[str | int, ...], key: str) -> None:
    node = FULL
    for p in path:
        node = node[p]
    if key in node or key in ("apiVersion", "kind"):
        return
    loaded = _load(_dump(_replace(FULL, (*path, key), 1) if path else {**FULL, key: 1}))
    assert isinstance(loaded, ConfigError)


SCORE_PLUGINS = [r.name for r in default_config().profiles[0].enabled(names.SCORE)]


@FUZZ
@given(
    st.dictionaries(st.sampled_from(SCORE_PLUGINS), st.integers(-(1 << 40), 1 << 40), max_size=7),
    st.sampled_from(["multiPoint", "score"]),
)
def test_score_weights(weights: dict[str, int], point: str) -> None:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {point: {"enabled": [
            {"name": n, "weight": w} for n, w in weights.items()]}}}],
    }  # fmt: skip
    loaded = _load(_dump(doc))
    valid = all(0 <= w <= INT32_MAX for w in weights.values())
    assert isinstance(loaded, SchedulerConfiguration) == valid
    if isinstance(loaded, SchedulerConfiguration):
        assert_runs(loaded)


def test_the_valid_base_runs() -> None:
    """The fuzzers start from FULL; it must itself load and run."""
    cfg = config_from_bytes(_dump(FULL))
    assert_runs(cfg)
    assert _parse_path("profiles[0].plugins.score") == ["profiles", 0, "plugins", "score"]


EDGE_INTS = [0, 1, 2, 10, 11, 100, 101, INT32_MAX, INT32_MAX + 1, (1 << 63) - 1, 1 << 63]
NUMBERS = st.one_of(
    st.sampled_from(EDGE_INTS + [-e for e in EDGE_INTS]),
    st.integers(-(1 << 65), 1 << 65),
    st.floats(min_value=-1e40, max_value=1e40),
)
NUMERIC_PATHS = [
    p for p, v in _walk(FULL) if p and isinstance(v, int | float) and not isinstance(v, bool)
]
EDGE_DURATIONS = ["1s", "999ms", "596523h14m7s", "596523h14m8s", "2562047h47m16.854775807s",
                  "30s", "20s", "4s", "3.333s", "1ns", "0.5s"]  # fmt: skip
DURATIONS = st.one_of(
    st.sampled_from(EDGE_DURATIONS),
    st.builds(
        lambda n, unit: f"{n}{unit}",
        st.integers(0, 10**12),
        st.sampled_from(["ns", "us", "ms", "s", "m", "h"]),
    ),
)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(NUMERIC_PATHS), NUMBERS), min_size=1, max_size=4))
def test_numbers_at_their_edges(changes: list[tuple[tuple[str | int, ...], Any]]) -> None:
    doc = FULL
    for path, value in changes:
        doc = _replace(doc, path, value)
    loaded = _load(_dump(doc))
    if isinstance(loaded, SchedulerConfiguration):
        assert_runs(loaded)


@FUZZ
@given(DURATIONS, DURATIONS, DURATIONS)
def test_lease_timings(lease: str, renew: str, retry: str) -> None:
    doc = copy.deepcopy(FULL)
    doc["leaderElection"].update(leaseDuration=lease, renewDeadline=renew, retryPeriod=retry)
    loaded = _load(_dump(doc))
    if isinstance(loaded, SchedulerConfiguration):
        assert_runs(loaded)
