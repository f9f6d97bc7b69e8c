"""Plugin merging and multiPoint expansion (as upstream), and Go duration strings."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.catalog import config_from_dict
from scheduler.catalog import implements as in_tree_implements
from scheduler.config import (
    API_VERSION,
    KIND,
    ConfigError,
    PluginRef,
    PluginSet,
    Profile,
    format_duration,
    merge_plugin_set,
    parse_duration,
)
from scheduler.config.plugins import expand_extension_points
from scheduler.config.types import Plugins


def profile(plugins: dict[str, Any]) -> Profile:
    c = config_from_dict(
        {"apiVersion": API_VERSION, "kind": KIND, "profiles": [{"plugins": plugins}]}
    )
    return c.profiles[0]


def at(p: Profile, point: str) -> list[str]:
    return [r.name for r in p.enabled(point)]


def weights(p: Profile) -> dict[str, int]:
    return {r.name: r.weight for r in p.enabled("score")}


R = PluginRef


@pytest.mark.parametrize(
    ("default", "custom", "expected"),
    [
        # nothing custom: the defaults
        (PluginSet((R("A"), R("B", 2))), PluginSet(), PluginSet((R("A"), R("B", 2)))),
        # disabled removes a default, and is kept (the expansion reads it)
        (PluginSet((R("A"), R("B"))), PluginSet(disabled=("A",)), PluginSet((R("B"),), ("A",))),
        # "*" removes every default; custom enabled stay
        (
            PluginSet((R("A"), R("B"))),
            PluginSet((R("C"),), ("*",)),
            PluginSet((R("C"),), ("*",)),
        ),
        # re-enabling a default overrides it in place (order kept, weight from custom)
        (
            PluginSet((R("A", 1), R("B", 1), R("C", 1))),
            PluginSet((R("X"), R("B", 7))),
            PluginSet((R("A", 1), R("B", 7), R("C", 1), R("X"))),
        ),
        # disabled and re-enabled: the custom one is appended at the end
        (
            PluginSet((R("A"), R("B"))),
            PluginSet((R("A", 5),), ("A",)),
            PluginSet((R("B"), R("A", 5)), ("A",)),
        ),
    ],
)
def test_merge_plugin_set_as_upstream(
    default: PluginSet, custom: PluginSet, expected: PluginSet
) -> None:
    assert merge_plugin_set(default, custom) == expected


def test_multi_point_reweight_overrides_the_default_in_place() -> None:
    p = profile({"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 9}]}})
    assert weights(p)["ImageLocality"] == 9
    assert at(p, "score")[-1] == "ImageLocality"  # default position kept


def test_specific_point_entry_overrides_multi_point_and_comes_first() -> None:
    p = profile({"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}})
    assert at(p, "score")[0] == "NodeResourcesFit"
    assert weights(p)["NodeResourcesFit"] == 5
    assert at(p, "score").count("NodeResourcesFit") == 1
    assert "NodeResourcesFit" in at(p, "filter")  # other points keep the multiPoint entry


def test_disabled_in_multi_point_is_gone_everywhere() -> None:
    p = profile({"multiPoint": {"disabled": [{"name": "NodeAffinity"}]}})
    for point in ("preFilter", "filter", "preScore", "score"):
        assert "NodeAffinity" not in at(p, point)


def test_disabled_at_one_point_is_gone_only_there() -> None:
    p = profile({"score": {"disabled": [{"name": "NodeAffinity"}]}})
    assert "NodeAffinity" not in at(p, "score")
    assert "NodeAffinity" in at(p, "filter")
    assert "NodeAffinity" in at(p, "preScore")


def test_star_at_a_point_keeps_only_its_own_enabled_list() -> None:
    p = profile(
        {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "ImageLocality", "weight": 4}],
            }
        }
    )
    assert [(r.name, r.weight) for r in p.enabled("score")] == [("ImageLocality", 4)]
    assert len(at(p, "filter")) == 12  # other points untouched


def test_star_in_multi_point_with_own_minimal_set() -> None:
    p = profile(
        {
            "multiPoint": {
                "disabled": [{"name": "*"}],
                "enabled": [
                    {"name": "PrioritySort"},
                    {"name": "NodeResourcesFit", "weight": 2},
                    {"name": "DefaultBinder"},
                ],
            }
        }
    )
    assert at(p, "queueSort") == ["PrioritySort"]
    assert at(p, "filter") == ["NodeResourcesFit"]
    assert [(r.name, r.weight) for r in p.enabled("score")] == [("NodeResourcesFit", 2)]
    assert at(p, "bind") == ["DefaultBinder"]
    assert at(p, "postFilter") == []
    assert p.args_for("DefaultPreemption") is None  # not enabled: no default args


def test_plugin_moved_from_multi_point_to_one_point() -> None:
    p = profile(
        {
            "multiPoint": {"disabled": [{"name": "NodePorts"}]},
            "filter": {"enabled": [{"name": "NodePorts"}]},
        }
    )
    assert at(p, "filter")[-1] == "NodePorts"
    assert "NodePorts" not in at(p, "preFilter")


def test_unset_score_weight_becomes_one_and_other_points_carry_no_weight() -> None:
    p = profile({"score": {"enabled": [{"name": "ImageLocality"}]}})
    assert weights(p)["ImageLocality"] == 1
    assert all(r.weight == 0 for r in p.enabled("filter"))


def test_expansion_with_a_supplied_implements_table() -> None:
    plugins = Plugins(
        multi_point=PluginSet((R("Custom", 3), R("PrioritySort"))),
    )

    def implements(name: str) -> frozenset[str]:
        return frozenset({"filter", "score"}) if name == "Custom" else in_tree_implements(name)

    points = expand_extension_points(plugins, "plugins", implements)
    assert points["filter"] == (R("Custom"),)
    assert points["score"] == (R("Custom", 3),)
    assert points["queueSort"] == (R("PrioritySort"),)


def test_expansion_rejects_a_plugin_at_a_point_it_does_not_implement() -> None:
    plugins = Plugins(bind=PluginSet((R("PrioritySort"),)))
    with pytest.raises(ConfigError) as info:
        expand_extension_points(plugins, "profiles[3].plugins", in_tree_implements)
    assert info.value.field == "profiles[3].plugins.bind.enabled[0].name"


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("2us", 0.000002),
        ("2µs", 0.000002),
        ("100ns", 1e-7),
        ("0", 0.0),
        ("-5s", -5.0),
        ("+5s", 5.0),
        (".5s", 0.5),
        ("1h2m3.5s", 3723.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "1m 30s", "--1s", "1.2.3s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (15, "15s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (3723.5, "1h2m3.5s"),
        (0.5, "500ms"),
        (0.0015, "1.5ms"),
        (2e-6, "2µs"),
        (1e-7, "100ns"),
        (-2, "-2s"),
        (1.25, "1.25s"),
    ],
)
def test_format_duration_as_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)
