"""Loading KubeSchedulerConfiguration: defaults, field errors naming the path, dump round trip."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import config_from_dict, config_from_yaml, default_config, load_config
from scheduler.config import (
    API_VERSION,
    KIND,
    ConfigError,
    SchedulerConfiguration,
    dump_config,
    names,
    write_config,
)
from scheduler.config.args import DefaultPreemptionArgs, NodeResourcesFitArgs
from tests.unit.test_metrics_wiring import ScriptedConnection


def cfg(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **fields}


def load(**fields: Any) -> SchedulerConfiguration:
    return config_from_dict(cfg(**fields))


# ---------------------------------------------------------------- defaults


def test_defaults_are_upstreams_with_secondary_scheduler_names() -> None:
    c = default_config()
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (16, 0)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    le = c.leader_election
    assert le.leader_elect is True
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_namespace) == ("leases", "kube-system")
    assert le.resource_name == "kube-async-scheduler"  # not upstream's kube-scheduler
    assert (c.client_connection.qps, c.client_connection.burst) == (50.0, 100)
    assert [p.scheduler_name for p in c.profiles] == ["kube-async-scheduler"]
    assert c.profiles[0].percentage_of_nodes_to_score is None
    assert percentage_in_use(c) == 0


# Upstream's default plugins expanded per extension point, as kube-scheduler v1.37.2 does:
# the multiPoint list of pkg/scheduler/apis/config/v1/default_plugins.go, each plugin placed
# at every point its type implements (expandMultiPointPlugins in framework/runtime/
# framework.go; the interfaces asserted in each plugin's file). Here the expansion runs on
# this scheduler's plugin classes, so a class that declares a Protocol upstream's type does
# not implement (or lacks one) fails this.
_FILTERS_WITH_PRE_FILTER = (
    "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
    "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
)  # fmt: skip
UPSTREAM_DEFAULT_EXPANSION: dict[str, tuple[tuple[str, int], ...]] = {
    "preEnqueue": (("SchedulingGates", 0), ("DefaultPreemption", 0)),
    "queueSort": (("PrioritySort", 0),),
    "preFilter": tuple((n, 0) for n in _FILTERS_WITH_PRE_FILTER),
    "filter": tuple(
        (n, 0) for n in ("NodeUnschedulable", "NodeName", "TaintToleration", *_FILTERS_WITH_PRE_FILTER)
    ),
    "postFilter": (("DefaultPreemption", 0),),
    "preScore": tuple(
        (n, 0)
        for n in ("TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding",
                  "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation")
    ),
    "score": (
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),  # StorageCapacityScoring: beta, on in 1.37
        ("PodTopologySpread", 2), ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
    ),
    "reserve": (("VolumeBinding", 0),),
    "permit": (),
    "preBind": (("VolumeBinding", 0),),
    "bind": (("DefaultBinder", 0),),
    "postBind": (),
}


def test_default_profile_expands_to_the_default_plugins_per_extension_point() -> None:
    profile = default_config().profiles[0]
    expected = {
        point: tuple(names.PluginRef(n, w) for n, w in refs)
        for point, refs in UPSTREAM_DEFAULT_EXPANSION.items()
    }
    assert dict(profile.extension_points) == expected


def test_default_profile_gets_default_args_for_enabled_plugins() -> None:
    profile = default_config().profiles[0]
    assert profile.args_for(names.DEFAULT_PREEMPTION) == DefaultPreemptionArgs()
    assert profile.args_for(names.NODE_RESOURCES_FIT) == NodeResourcesFitArgs()
    assert profile.args_for(names.PRIORITY_SORT) is None


def percentage_in_use(c: SchedulerConfiguration) -> int:
    """The percentageOfNodesToScore the scheduler built from `c` applies to its profile."""
    app = SchedulerApp(c, ScriptedConnection(), RunOptions(leader_elect=False))  # type: ignore[arg-type]
    (framework,) = app.frameworks.values()
    return framework.percentage_of_nodes_to_score


def test_profile_percentage_overrides_the_global_one() -> None:
    c = load(percentageOfNodesToScore=30, profiles=[{"percentageOfNodesToScore": 70}])
    assert percentage_in_use(c) == 70
    c = load(percentageOfNodesToScore=30)
    assert percentage_in_use(c) == 30


def test_durations_in_go_syntax() -> None:
    c = load(
        leaderElection={"leaseDuration": "1m30s", "renewDeadline": "45s", "retryPeriod": "500ms"}
    )
    le = c.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 45.0, 0.5)


def test_client_connection_content_type_is_accepted_and_ignored() -> None:
    c = load(clientConnection={"contentType": "application/vnd.kubernetes.protobuf", "qps": 20})
    assert c.client_connection.qps == 20.0


def test_multiple_profiles_keep_their_names() -> None:
    c = load(profiles=[{"schedulerName": "a"}, {"schedulerName": "b"}])
    assert c.scheduler_names == frozenset({"a", "b"})
    profile = c.profile("b")
    assert profile is not None
    assert profile.scheduler_name == "b"
    assert c.profile("nope") is None


# ---------------------------------------------------------------- errors name the field


def P(plugins: dict[str, Any] | None = None, **extra: Any) -> list[dict[str, Any]]:
    profile: dict[str, Any] = {"schedulerName": "s", **extra}
    if plugins is not None:
        profile["plugins"] = plugins
    return [profile]


ERROR_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (case id, fields, expected field path, message fragment)
    ("unknown top-level", {"parallelizm": 4}, "parallelizm", "unknown field"),
    ("unknown nested", {"leaderElection": {"leaseDurationz": "1s"}},
     "leaderElection.leaseDurationz", "unknown field"),
    ("unknown in plugin entry",
     {"profiles": P({"score": {"enabled": [{"name": "ImageLocality", "wieght": 2}]}})},
     "profiles[0].plugins.score.enabled[0].wieght", "unknown field"),
    ("unknown extension point", {"profiles": P({"scoring": {}})}, "profiles[0].plugins.scoring",
     "unknown field"),
    ("wrong type int", {"parallelism": "16"}, "parallelism", "must be an integer"),
    ("bool is not int", {"parallelism": True}, "parallelism", "must be an integer"),
    ("wrong type object", {"leaderElection": "yes"}, "leaderElection", "must be an object"),
    ("wrong type list", {"profiles": {"schedulerName": "x"}}, "profiles", "must be a list"),
    ("duration as number", {"leaderElection": {"leaseDuration": 15}},
     "leaderElection.leaseDuration", "duration string"),
    ("bad duration", {"leaderElection": {"leaseDuration": "15 seconds"}},
     "leaderElection.leaseDuration", "invalid duration"),
    ("zero parallelism", {"parallelism": 0}, "parallelism", "greater than 0"),
    ("negative percentage", {"percentageOfNodesToScore": -1}, "percentageOfNodesToScore",
     "[0, 100]"),
    ("percentage over 100", {"percentageOfNodesToScore": 101}, "percentageOfNodesToScore",
     "[0, 100]"),
    ("profile percentage", {"profiles": P(percentageOfNodesToScore=200)},
     "profiles[0].percentageOfNodesToScore", "[0, 100]"),
    ("negative initial backoff", {"podInitialBackoffSeconds": -1}, "podInitialBackoffSeconds",
     "greater than 0"),
    ("initial backoff over max", {"podInitialBackoffSeconds": 20, "podMaxBackoffSeconds": 10},
     "podMaxBackoffSeconds", "greater than or equal"),
    ("renewDeadline equals leaseDuration",
     {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}},
     "leaderElection.leaseDuration", "greater than renewDeadline"),
    ("renewDeadline over leaseDuration",
     {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "20s"}},
     "leaderElection.leaseDuration", "greater than renewDeadline"),
    ("renewDeadline vs retry jitter",
     {"leaderElection": {"renewDeadline": "2s", "retryPeriod": "2s"}},
     "leaderElection.renewDeadline", "retryPeriod"),
    ("negative lease", {"leaderElection": {"leaseDuration": "-5s"}},
     "leaderElection.leaseDuration", "greater than zero"),
    ("other resource lock", {"leaderElection": {"resourceLock": "endpoints"}},
     "leaderElection.resourceLock", "leases"),
    ("bad lease name", {"leaderElection": {"resourceName": "Bad_Name"}},
     "leaderElection.resourceName", "not a Lease name"),
    ("bad lease namespace", {"leaderElection": {"resourceNamespace": "a.b"}},
     "leaderElection.resourceNamespace", "not a namespace name"),
    ("qps not finite", {"clientConnection": {"qps": float("nan")}}, "clientConnection.qps",
     "finite float32"),
    ("negative burst", {"clientConnection": {"burst": -1}}, "clientConnection.burst", "negative"),
    ("extenders", {"extenders": [{"urlPrefix": "http://x"}]}, "extenders", "not supported"),
    ("unknown plugin", {"profiles": P({"score": {"enabled": [
        {"name": "ImageLocality"}, {"name": "NodeResourcesFit"}, {"name": "Nope"}]}})},
     "profiles[0].plugins.score.enabled[2].name", "unknown plugin 'Nope'"),
    ("unknown disabled plugin", {"profiles": P({"filter": {"disabled": [{"name": "Nope"}]}})},
     "profiles[0].plugins.filter.disabled[0].name", "unknown plugin"),
    ("star enabled", {"profiles": P({"filter": {"enabled": [{"name": "*"}]}})},
     "profiles[0].plugins.filter.enabled[0].name", "only allowed in disabled"),
    ("plugin at wrong point", {"profiles": P({"score": {"enabled": [{"name": "NodeName"}]}})},
     "profiles[0].plugins.score.enabled[0].name", "does not implement the score"),
    ("negative weight",
     {"profiles": P({"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}})},
     "profiles[0].plugins.score.enabled[0].weight", "negative"),
    ("missing plugin name", {"profiles": P({"score": {"enabled": [{"weight": 1}]}})},
     "profiles[0].plugins.score.enabled[0].name", "required"),
    ("twice at one point", {"profiles": P({"score": {"enabled": [
        {"name": "ImageLocality"}, {"name": "ImageLocality"}]}})},
     "profiles[0].plugins.score.enabled[1].name", "twice"),
    ("twice in multiPoint", {"profiles": P({"multiPoint": {"enabled": [
        {"name": "ImageLocality"}, {"name": "ImageLocality", "weight": 3}]}})},
     "profiles[0].plugins.multiPoint.enabled[1].name", "twice"),
    ("duplicate schedulerName", {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
     "profiles[1].schedulerName", "duplicate"),
    ("nameless second profile", {"profiles": [{"schedulerName": "a"}, {}]},
     "profiles[1].schedulerName", "required"),
    ("queue sort differs", {"profiles": [
        {"schedulerName": "a"},
        {"schedulerName": "b", "plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}]},
     "profiles[1].plugins.queueSort", "exactly one queue sort"),
    ("no bind plugin", {"profiles": P({"bind": {"disabled": [{"name": "DefaultBinder"}]}})},
     "profiles[0].plugins.bind", "bind plugin"),
    ("pluginConfig unknown plugin", {"profiles": P(pluginConfig=[{"name": "Nope", "args": {}}])},
     "profiles[0].pluginConfig[0].name", "unknown plugin"),
    ("pluginConfig duplicate", {"profiles": P(pluginConfig=[
        {"name": "DefaultPreemption"}, {"name": "DefaultPreemption"}])},
     "profiles[0].pluginConfig[1].name", "duplicate"),
    ("pluginConfig bad args", {"profiles": P(pluginConfig=[
        {"name": "NodeResourcesFit", "args": {}},
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 120}}])},
     "profiles[0].pluginConfig[1].args.minCandidateNodesPercentage", "range"),
    ("pluginConfig args not an object", {"profiles": P(pluginConfig=[
        {"name": "DefaultPreemption", "args": [1]}])},
     "profiles[0].pluginConfig[0].args", "must be an object"),
    ("wrong apiVersion", {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion",
     "must be kubescheduler.config.k8s.io/v1"),
    ("wrong kind", {"kind": "Config"}, "kind", "must be KubeSchedulerConfiguration"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [pytest.param(f, p, m, id=i) for i, f, p, m in ERROR_CASES],
)
def test_invalid_config_names_the_field(fields: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(cfg(**fields))
    assert info.value.field == path
    assert fragment in info.value.detail
    assert str(info.value).startswith(path)


def test_queue_sort_plugin_differing_between_profiles_is_an_error() -> None:
    # only PrioritySort sorts in-tree; pretend ImageLocality can, to get two candidates
    from scheduler.catalog import implements as in_tree_implements
    from scheduler.config import load as config_load

    def implements(name: str) -> frozenset[str]:
        extra = {"queueSort"} if name == "ImageLocality" else set()
        return in_tree_implements(name) | extra

    other_sort = {
        "queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "ImageLocality"}]}
    }
    same_sort = {"queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}]}}
    first = {"schedulerName": "a", "plugins": same_sort}
    ok = config_load.config_from_dict(
        cfg(profiles=[first, {"schedulerName": "b", "plugins": same_sort}]),
        implements=implements,
    )
    assert [r.name for r in ok.profiles[1].enabled(names.QUEUE_SORT)] == ["PrioritySort"]
    with pytest.raises(ConfigError) as info:
        config_load.config_from_dict(
            cfg(profiles=[first, {"schedulerName": "b", "plugins": other_sort}]),
            implements=implements,
        )
    assert info.value.field == "profiles[1].plugins.queueSort"
    assert "must be the same for all profiles" in info.value.detail


# ---------------------------------------------------------------- files


def test_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: KubeSchedulerConfiguration
            parallelism: 8
            leaderElection:
              leaderElect: false
            profiles:
            - schedulerName: batch
              plugins:
                score:
                  disabled:
                  - name: ImageLocality
            """
        )
    )
    c = load_config(path)
    assert c.parallelism == 8
    assert not c.leader_election.leader_elect
    assert "ImageLocality" not in [r.name for r in c.profiles[0].enabled("score")]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty configuration"),
        ("apiVersion: [unclosed", "invalid YAML"),
        (f"apiVersion: {API_VERSION}\nkind: {KIND}\nparallelism: 1\nparallelism: 2\n",
         "parallelism: duplicate field at line 4"),
        ("- just\n- a list\n", "must be a KubeSchedulerConfiguration object"),
    ],
)  # fmt: skip
def test_unreadable_yaml_is_a_config_error(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_yaml(text)
    assert fragment in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.yaml")


# ---------------------------------------------------------------- dump


CONFIGS_TO_ROUND_TRIP: list[dict[str, Any]] = [
    {},
    {
        "parallelism": 4,
        "percentageOfNodesToScore": 40,
        "podInitialBackoffSeconds": 2,
        "podMaxBackoffSeconds": 30,
        "leaderElection": {"leaseDuration": "1m30s", "renewDeadline": "1m", "retryPeriod": "1.5s",
                           "resourceName": "my-lease", "resourceNamespace": "sched"},
        "clientConnection": {"qps": 200.5, "burst": 400, "kubeconfig": "/k"},
        "profiles": [
            {"schedulerName": "a", "percentageOfNodesToScore": 10,
             "plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 5}],
                                   "disabled": [{"name": "NodeResourcesBalancedAllocation"}]},
                         "multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}},
             "pluginConfig": [
                 {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": 7,
                                                        "mode": "Sync"}},
                 {"name": "NodeResourcesFit",
                  "args": {"scoringStrategy": {"type": "MostAllocated"}}},
             ]},
            {"schedulerName": "b", "plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"},
                            {"name": "NodeResourcesFit", "weight": 3}]}}},
        ],
    },
]  # fmt: skip


@pytest.mark.parametrize("fields", CONFIGS_TO_ROUND_TRIP)
def test_dump_then_load_gives_the_same_configuration(fields: dict[str, Any]) -> None:
    original = load(**fields)
    text = dump_config(original)
    again = config_from_yaml(text)
    assert again == original
    assert dump_config(again) == text


def test_dump_is_kube_scheduler_shaped(tmp_path: Path) -> None:
    path = tmp_path / "effective.yaml"
    write_config(default_config(), path)
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == API_VERSION
    assert doc["kind"] == KIND
    assert doc["leaderElection"]["leaseDuration"] == "15s"
    assert doc["profiles"][0]["schedulerName"] == "kube-async-scheduler"
    multi = doc["profiles"][0]["plugins"]["multiPoint"]["enabled"]
    assert {"name": "TaintToleration", "weight": 3} in multi
    preemption = next(
        pc for pc in doc["profiles"][0]["pluginConfig"] if pc["name"] == "DefaultPreemption"
    )
    assert preemption["args"]["kind"] == "DefaultPreemptionArgs"
    assert preemption["args"]["minCandidateNodesPercentage"] == 10
