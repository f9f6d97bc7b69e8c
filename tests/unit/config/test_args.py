"""scheduler.config.args and names: defaults as upstream, errors naming the field."""

from typing import Any

import pytest

from scheduler.catalog import default_config
from scheduler.config import args as a
from scheduler.config import names
from scheduler.config.errors import ConfigError


def test_defaults_match_upstream() -> None:
    fit = a.default_plugin_args(names.NODE_RESOURCES_FIT)
    assert isinstance(fit, a.NodeResourcesFitArgs)
    assert fit.scoring_strategy.type == "LeastAllocated"
    assert fit.scoring_strategy.resources == (a.ResourceSpec("cpu", 1), a.ResourceSpec("memory", 1))
    pre = a.default_plugin_args(names.DEFAULT_PREEMPTION)
    assert pre == a.DefaultPreemptionArgs(10, 100, "Async", "OwnProfiles")
    ipa = a.default_plugin_args(names.INTER_POD_AFFINITY)
    assert ipa == a.InterPodAffinityArgs(1, False)
    spread = a.default_plugin_args(names.POD_TOPOLOGY_SPREAD)
    assert spread == a.PodTopologySpreadArgs((), "System")
    assert a.default_plugin_args(names.NODE_PORTS) is None


def test_default_score_weights() -> None:
    weights = {p.name: p.weight for p in default_config().profiles[0].enabled(names.SCORE)}
    assert weights == {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "VolumeBinding": 1,
        "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }  # fmt: skip
    assert [p.name for p in names.DEFAULT_MULTI_POINT][:2] == ["SchedulingGates", "PrioritySort"]


def test_parse_full_fit_args() -> None:
    parsed = a.parse_plugin_args(
        "NodeResourcesFit",
        {
            "kind": "NodeResourcesFitArgs",
            "ignoredResources": ["example.com/foo"],
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu", "weight": 3}],
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                },
            },
        },
        "p",
    )
    assert isinstance(parsed, a.NodeResourcesFitArgs)
    assert parsed.ignored_resources == {"example.com/foo"}
    assert parsed.scoring_strategy.shape[1] == a.UtilizationShapePoint(100, 10)
    assert parsed.scoring_strategy.resources == (a.ResourceSpec("cpu", 3),)


def test_preemption_extensions() -> None:
    parsed = a.parse_plugin_args(
        "DefaultPreemption", {"mode": "Sync", "victimScope": "All", "minCandidateNodesAbsolute": 5}
    )
    assert parsed == a.DefaultPreemptionArgs(10, 5, "Sync", "All")


def test_added_affinity() -> None:
    parsed = a.parse_plugin_args(
        "NodeAffinity",
        {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}},
    )  # fmt: skip
    assert isinstance(parsed, a.NodeAffinityArgs)
    assert parsed.added_required is not None
    assert parsed.added_required.matches({"pool": "a"}, "n")


ARGS = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("name", "raw", "field"),
    [
        ("NodeResourcesFit", {"bogus": 1}, f"{ARGS}.bogus"),
        ("NodeResourcesFit", {"scoringStrategy": {"type": "Random"}},
         f"{ARGS}.scoringStrategy.type"),
        ("NodeResourcesFit", {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
         f"{ARGS}.scoringStrategy.resources[0].weight"),
        ("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
         f"{ARGS}.scoringStrategy.requestedToCapacityRatio"),
        ("NodeResourcesFit", {"ignoredResources": "cpu"}, f"{ARGS}.ignoredResources"),
        ("InterPodAffinity", {"hardPodAffinityWeight": 101}, f"{ARGS}.hardPodAffinityWeight"),
        ("InterPodAffinity", {"hardPodAffinityWeight": "1"}, f"{ARGS}.hardPodAffinityWeight"),
        ("DefaultPreemption", {"minCandidateNodesPercentage": 120},
         f"{ARGS}.minCandidateNodesPercentage"),
        ("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
         f"{ARGS}.minCandidateNodesAbsolute"),
        ("DefaultPreemption", {"mode": "Later"}, f"{ARGS}.mode"),
        ("DefaultPreemption", {"victimScope": "Mine"}, f"{ARGS}.victimScope"),
        ("PodTopologySpread", {"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
         f"{ARGS}.defaultConstraints"),
        ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
         f"{ARGS}.defaultConstraints[0].maxSkew"),
        ("NodePorts", {"x": 1}, f"{ARGS}.x"),
        ("NodeAffinity", {"kind": "WrongArgs"}, f"{ARGS}.kind"),
    ],
)  # fmt: skip
def test_bad_args_name_the_field(name: str, raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        a.parse_plugin_args(name, raw, ARGS)
    assert err.value.field == field
