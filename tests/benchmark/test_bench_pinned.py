"""The pinned suite's pure logic: the pinning plan, the per-run window figures, the
workload matrix and its objects, the report's ratios and curves. No cluster, no speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import pinned_report, pinning, stats
from bench import pinned_workloads as pw
from bench.pinned import matrix

# ----- pinning ---------------------------------------------------------------------------


def test_plan_gives_the_contender_the_highest_core_and_the_rest_to_the_control_plane() -> None:
    p = pinning.plan({0, 1})
    assert p.contender == {1}
    assert p.control_plane == {0}
    assert p.gomaxprocs == 1
    assert p.describe() == {
        "contender_cpus": [1],
        "control_plane_cpus": [0],
        "contender_gomaxprocs": 1,
    }


def test_plan_honours_a_chosen_core() -> None:
    p = pinning.plan([0, 1, 2, 3], contender_cpu=2)
    assert p.contender == {2}
    assert p.control_plane == {0, 1, 3}


@pytest.mark.parametrize(("cpus", "chosen"), [({0}, None), (set(), None), ({0, 1}, 5)])
def test_plan_refuses_what_cannot_be_pinned(cpus: set[int], chosen: int | None) -> None:
    with pytest.raises(ValueError):
        pinning.plan(cpus, chosen)


def test_cpu_lists_parse_as_the_kernel_writes_them() -> None:
    assert pinning.parse_cpu_list("0") == {0}
    assert pinning.parse_cpu_list("0-3") == {0, 1, 2, 3}
    assert pinning.parse_cpu_list("0,2-3\n") == {0, 2, 3}


def test_affinity_of_this_process_is_what_the_kernel_reports() -> None:
    import os

    masks = pinning.affinity_of(os.getpid())
    assert sorted(os.sched_getaffinity(0)) in masks


# ----- window figures --------------------------------------------------------------------


def test_value_at_interpolates_and_clamps() -> None:
    series = [(10.0, 0.0), (11.0, 1.0), (13.0, 2.0)]
    assert stats.value_at(series, 9.0) == 0.0
    assert stats.value_at(series, 10.5) == pytest.approx(0.5)
    assert stats.value_at(series, 12.0) == pytest.approx(1.5)
    assert stats.value_at(series, 20.0) == 2.0
    assert stats.value_at([], 1.0) is None


def test_drain_window_runs_from_first_to_last_bind() -> None:
    created = {f"p{i}": 0.0 for i in range(5)}
    bound = {"p0": 12.0, "p1": 12.5, "p2": 13.0, "p3": 13.5, "p4": 14.0}
    # 1 CPU second per wall second from the start (10.0): 2 s of CPU in the window
    series = [(10.0, 0.0), (20.0, 10.0)]
    f = stats.window_figures("drain", 10.0, created, bound, series)
    assert f["complete"] and f["bound"] == 5
    assert f["window_s"] == pytest.approx(2.0)
    assert f["throughput"] == pytest.approx(4 / 2.0)
    assert f["cpu_s_window"] == pytest.approx(2.0)
    assert f["cpu_ms_per_pod"] == pytest.approx(2000.0 / 4)
    assert f["startup_s"] == pytest.approx(2.0)
    assert f["startup_cpu_s"] == pytest.approx(2.0)
    # latency from the contender's start
    assert f["latency_s"]["p50"] == pytest.approx(3.0)


def test_arrival_window_runs_from_first_create_to_last_bind() -> None:
    created = {"a": 100.0, "b": 101.0}
    bound = {"a": 100.5, "b": 102.0}
    series = [(90.0, 5.0), (110.0, 25.0)]
    f = stats.window_figures("arrival", 90.0, created, bound, series)
    assert f["throughput"] == pytest.approx(2 / 2.0)
    assert f["cpu_ms_per_pod"] == pytest.approx(2000.0 / 2)
    assert f["latency_s"]["p50"] == pytest.approx(0.75)
    assert f["startup_s"] is None


def test_window_figures_of_a_run_that_bound_nothing() -> None:
    f = stats.window_figures("drain", 0.0, {"a": 0.0}, {}, [(0.0, 0.0)])
    assert not f["complete"]
    assert f["throughput"] is None and f["cpu_ms_per_pod"] is None
    with pytest.raises(ValueError):
        stats.window_figures("trickle", 0.0, {}, {}, [])


# ----- workloads -------------------------------------------------------------------------


def test_the_matrix_has_nine_workloads_per_size_and_memory_at_5000() -> None:
    ws = pw.select()
    for n in pw.SIZES:
        names = [w.name for w in ws if w.nodes == n]
        assert set(pw.WORKLOAD_NAMES) <= set(names)
        assert ("Memory" in names) == (n >= 5000)
    mem = next(w for w in ws if w.name == "Memory")
    assert (mem.nodes, mem.init_pods + mem.measured_pods) == (5000, 20000)
    # Memory tops up the plain set: it comes right after the last plain workload
    at5000 = [w for w in ws if w.nodes == 5000]
    i = [w.name for w in at5000].index("Memory")
    assert at5000[i - 1].init_set == "plain" and at5000[i + 1].init_set != "plain"


def test_select_subsets_and_refuses_unknown_names() -> None:
    ws = pw.select([500], ["SchedulingBasic", "PreemptionBasic"], pods_scale=0.5)
    assert [w.name for w in ws] == ["SchedulingBasic", "PreemptionBasic"]
    full = {w.name: w for w in pw.select([500])}
    assert ws[0].measured_pods == full["SchedulingBasic"].measured_pods // 2
    with pytest.raises(ValueError, match="unknown workload"):
        pw.select([500], ["SchedulingBasics"])
    assert [w.name for w in pw.select([5000], ["Memory"])] == ["Memory"]
    assert pw.select([5000], ["Memory"], memory=False) == []


def test_anti_affinity_pods_always_have_a_free_node() -> None:
    for w in pw.select():
        if w.measured == "anti":
            assert w.init_pods + w.measured_pods <= w.nodes
    with pytest.raises(ValueError, match="node each"):
        pw.PinnedWorkload("X", 10, "green", 5, "anti", 6)


def test_init_pods_are_bound_and_named_by_set_and_index() -> None:
    w = pw.PinnedWorkload("X", 3, "low", 7, "preemptor", 2)
    pods = list(pw.init_pods(w))
    assert [p["metadata"]["name"] for p in pods] == [f"init-low-{i}-g0" for i in range(7)]
    assert [p["metadata"]["labels"][pw.INIT_KEY_LABEL] for p in pods][:2] == ["low-0", "low-1"]
    assert next(iter(pw.init_pods(w, 3)))["metadata"]["name"] == "init-low-0-g3"
    assert [p["spec"]["nodeName"] for p in pods[:4]] == ["node-0", "node-1", "node-2", "node-0"]
    assert all(p["metadata"]["labels"][pw.INIT_SET_LABEL] == "low" for p in pods)
    cpu = pods[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    assert cpu == "900m"


def _constraints(p: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in p["spec"].items() if k in ("affinity", "topologySpreadConstraints")}


def test_measured_templates_carry_upstreams_constraints() -> None:
    anti = pw.template_pod("anti", "a", "measured")
    term = anti["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert anti["metadata"]["labels"]["color"] == "green"
    aff = pw.template_pod("affinity", "b", "measured")
    assert "podAffinity" in aff["spec"]["affinity"]
    spread = pw.template_pod("spread", "c", "measured")["spec"]["topologySpreadConstraints"][0]
    assert (spread["maxSkew"], spread["whenUnsatisfiable"]) == (5, "DoNotSchedule")
    huge = pw.template_pod("unschedulable", "d", "churn")
    assert huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "9"
    assert _constraints(pw.template_pod("plain", "e", "measured")) == {}
    with pytest.raises(ValueError):
        pw.template_pod("nope", "f", "measured")


def test_nodes_are_ready_and_kwok_managed_only_when_asked() -> None:
    n = pw.node_manifest(4)
    assert n["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-b"
    assert n["status"]["conditions"][0] == {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
    }
    assert "kwok.x-k8s.io/node" in n["metadata"]["annotations"]
    assert "annotations" not in pw.node_manifest(4, kwok=False)["metadata"]


def test_matrix_runs_the_ceiling_only_where_marked_and_only_drain() -> None:
    ws = pw.select([500], ["SchedulingBasic", "TopologySpreading"])
    runs = matrix(ws, ["upstream", "ours-async", "ceiling"], ["drain", "arrival"])
    got = [(w.name, shape, c) for w, shape, c in runs]
    assert ("SchedulingBasic", "drain", "ceiling") in got
    assert ("SchedulingBasic", "arrival", "ceiling") not in got
    assert ("TopologySpreading", "drain", "ceiling") not in got
    assert ("SchedulingBasic", "arrival", "ours-async") in got
    assert not any(s == "arrival" for _, s, _ in matrix(ws, ["upstream"], ["drain"]))


# ----- report ----------------------------------------------------------------------------


def _run(size: int, workload: str, shape: str, contender: str, cpu: float, **kw: Any) -> dict:
    r: dict[str, Any] = {
        "size": size,
        "workload": {"name": workload},
        "shape": shape,
        "scheduler": contender,
        "ok": kw.get("ok", True),
        "error": None if kw.get("ok", True) else "only 3/10 measured pods bound in 60s",
        "measured": {
            "cpu_ms_per_pod": cpu,
            "throughput": kw.get("tp", 100.0),
            "latency_s": {"p50": 0.5, "p99": kw.get("p99", 1.0)},
            "bound": 10,
            "created": 10,
            "startup_s": 1.0,
        },
        "process": {
            "peak_rss_mib": kw.get("rss", 100.0),
            "affinity": [[1]],
            "gomaxprocs_logged": "1",
        },
        "host": {"loadavg_1m": 1.0},
    }
    if "victims" in kw:
        r["preemption"] = {"victims": {"total": kw["victims"], "mean": kw["victims"] / 10}}
    return r


def _doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "suite": "pinned",
        "command": "python -m bench run --suite pinned",
        "machine": {"cpu": "Test", "cores": 2},
        "versions": {"kube-scheduler": "v1.37.2"},
        "pinning": {"contender_cpus": [1], "control_plane_cpus": [0], "contender_gomaxprocs": 1},
        "options": {"arrival_rate": 200, "pods_scale": 1.0, "kwok_nodes": True},
        "clusters": {"500": {"cluster_up_s": 5.0, "nodes_created_s": 2.0}},
        "runs": runs,
    }


def test_rows_take_medians_and_ratios_are_ours_over_upstream() -> None:
    doc = _doc(
        [
            _run(500, "SchedulingBasic", "drain", "upstream", 2.0, tp=200.0),
            _run(500, "SchedulingBasic", "drain", "ours-async", 1.0, tp=300.0),
            _run(500, "SchedulingBasic", "drain", "ours-async", 3.0, tp=100.0),
            _run(500, "SchedulingBasic", "drain", "ours-async", 0.1, ok=False),
        ]
    )
    by = pinned_report.rows(doc)[(500, "SchedulingBasic", "drain")]
    assert by["ours-async"]["runs"] == 3 and by["ours-async"]["ok"] == 2
    assert by["ours-async"]["cpu_ms_per_pod"] == pytest.approx(2.0)  # the failed 0.1 left out
    r = pinned_report.ratios(by)
    assert r["cpu_ms_per_pod"] == pytest.approx(1.0)
    assert r["throughput"] == pytest.approx(1.0)
    assert r["victims"] is None


def test_cpu_curves_are_per_workload_sorted_by_size_without_the_ceiling() -> None:
    doc = _doc(
        [
            _run(5000, "SchedulingBasic", "drain", "upstream", 3.0),
            _run(500, "SchedulingBasic", "drain", "upstream", 2.0),
            _run(500, "SchedulingBasic", "drain", "ceiling", 0.2),
            _run(500, "SchedulingBasic", "arrival", "upstream", 9.0),
            _run(500, "SchedulingBasic", "drain", "ours-async", 1.0),
        ]
    )
    curves = pinned_report.cpu_curves(doc)
    assert curves == {
        "SchedulingBasic": {"upstream": [(500, 2.0), (5000, 3.0)], "ours-async": [(500, 1.0)]}
    }


def test_render_puts_both_schedulers_side_by_side_with_the_ratio() -> None:
    doc = _doc(
        [
            _run(500, "PreemptionBasic", "drain", "upstream", 2.0, victims=30, rss=200.0),
            _run(500, "PreemptionBasic", "drain", "ours-async", 1.0, victims=30, rss=100.0),
            _run(500, "SchedulingBasic", "drain", "ceiling", 0.2, tp=900.0),
            _run(500, "SchedulingBasic", "drain", "upstream", 2.0, ok=False),
        ]
    )
    text = pinned_report.render(doc, "bench/results/pinned-x.json", ["benchmarks/a.png"])
    assert "### 500 nodes" in text
    line = next(x for x in text.splitlines() if x.startswith("| PreemptionBasic"))
    assert "2.00 / 1.00 (0.50x)" in line  # CPU ms per pod
    assert "200 / 100 (0.50x)" in line  # peak RSS
    assert "3.00 / 3.00 (1.00x)" in line  # victims per preemptor
    assert "| 900 |" in next(x for x in text.splitlines() if x.startswith("| SchedulingBasic"))
    assert "SchedulingBasic drain x upstream: only 3/10" in text
    assert "CPU [1]" in text and "[[1]]" in text
    assert "GOMAXPROCS kube-scheduler logged at start: 1" in text
    assert "![a](benchmarks/a.png)" in text


def test_plots_write_the_cpu_per_pod_figures(tmp_path: Path) -> None:
    doc = _doc(
        [
            _run(500, "SchedulingBasic", "drain", "upstream", 2.0),
            _run(5000, "SchedulingBasic", "drain", "upstream", 3.0),
            _run(500, "SchedulingBasic", "drain", "ours-async", 1.0),
            _run(500, "TopologySpreading", "drain", "ours-async", 1.5),
        ]
    )
    paths = pinned_report.plots(doc, tmp_path)
    assert [p.name for p in paths] == ["pinned-cpu-per-pod-basic.png", "pinned-cpu-per-pod.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert pinned_report.plots(_doc([]), tmp_path / "none") == []


def test_a_suite_without_its_result_file_keeps_its_section(tmp_path: Path) -> None:
    from bench import report

    page = tmp_path / "benchmarks.md"
    page.write_text(
        "# Benchmarks\n\nintro\n\n## Suite `smoke`\n\n| a | b |\n\n"
        "## Suite `pinned` (scheduler-bound)\n\nold pinned\n"
    )
    sections = report.suite_sections(page.read_text())
    assert set(sections) == {"smoke", "pinned"}
    assert "| a | b |" in sections["smoke"]
    result = tmp_path / "pinned.json"
    import json

    result.write_text(json.dumps(_doc([_run(500, "SchedulingBasic", "drain", "upstream", 2.0)])))
    report.write_docs([result], docs_path=page, images=tmp_path / "img")
    text = page.read_text()
    assert "## Suite `smoke`" in text and "| a | b |" in text  # kept
    assert "old pinned" not in text  # replaced by the new result
    assert text.count("## Suite `pinned`") == 1


def test_merge_makes_one_doc_and_a_later_run_replaces_an_earlier_one() -> None:
    a = _doc([_run(500, "SchedulingBasic", "drain", "upstream", 2.0)])
    a["elapsed_s"] = 10.0
    b = _doc(
        [
            _run(500, "SchedulingBasic", "drain", "upstream", 4.0),
            _run(5000, "SchedulingBasic", "drain", "upstream", 6.0),
        ]
    )
    b["clusters"] = {"5000": {"cluster_up_s": 9.0}}
    b["elapsed_s"] = 5.0
    m = pinned_report.merge([a, b], ["a.json", "b.json"])
    assert [r["measured"]["cpu_ms_per_pod"] for r in m["runs"]] == [4.0, 6.0]
    assert set(m["clusters"]) == {"500", "5000"}
    assert m["elapsed_s"] == 15.0
    with pytest.raises(ValueError):
        pinned_report.merge([], [])


def test_matrix_cost_counts_init_sets_once_per_run_of_the_same_set() -> None:
    from bench.pinned import matrix_cost

    basic = pw.PinnedWorkload("A", 10, "plain", 10, "plain", 5, shapes=("drain", "arrival"))
    topped = pw.PinnedWorkload("M", 10, "plain", 30, "plain", 7)
    low = pw.PinnedWorkload("P", 10, "low", 40, "preemptor", 2)
    todo = matrix([basic, topped, low], ["upstream", "ours-async"], ["drain", "arrival"])
    cost = matrix_cost(todo)[10]
    assert cost["runs"] == 2 * 2 + 2 + 2
    assert cost["scheduled"] == 4 * 5 + 2 * 7 + 2 * 2
    # init: 10 plain once, topped up by 20, 40 low once; plus every measured pod
    assert cost["created"] == 10 + 20 + 40 + cost["scheduled"]


def test_what_the_machine_could_not_hold_is_said_with_the_largest_size_that_ran() -> None:
    doc = _doc(
        [
            _run(500, "SchedulingPodAffinity", "drain", "ours-async", 9.0),
            _run(1000, "SchedulingPodAffinity", "drain", "ours-async", 9.0),
            _run(5000, "SchedulingPodAffinity", "drain", "ours-async", 0.0, ok=False),
            _run(5000, "SchedulingPodAffinity", "drain", "upstream", 3.0),
        ]
    )
    assert pinned_report.not_held(doc) == [
        "SchedulingPodAffinity x ours-async: did not complete at 5000 nodes "
        "(largest size that ran: 1000 nodes)"
    ]
    assert "What this machine could not hold:" in pinned_report.render(doc, "x.json")


def test_a_measured_pod_evicted_before_its_bind_is_settled_not_bound() -> None:
    from bench.runner import Recorder
    from bench.workloads import ROLE_LABEL

    rec = Recorder(api=None)  # type: ignore[arg-type]  # _note never touches the API
    meta = {"labels": {ROLE_LABEL: "measured"}}
    rec._note({"metadata": {"name": "m-0", **meta}, "spec": {"nodeName": "n1"}}, False, 1.0)
    rec._note({"metadata": {"name": "m-1", **meta}, "spec": {}}, False, 1.0)
    rec._note({"metadata": {"name": "m-1", **meta}, "spec": {}}, True, 2.0)  # a victim
    rec._note({"metadata": {"name": "m-2", **meta}, "spec": {}}, False, 1.0)  # still pending
    rec._note({"metadata": {"name": "m-0", **meta}, "spec": {"nodeName": "n1"}}, True, 3.0)
    assert rec.count_bound("measured") == 1
    assert rec.evicted_unbound("measured") == ["m-1"]


def test_drain_window_opens_at_a_preemptions_first_write_before_the_first_bind() -> None:
    created = {"p0": 0.0, "p1": 0.0}
    bound = {"p0": 14.0, "p1": 15.0}
    series = [(10.0, 0.0), (20.0, 10.0)]
    # the first victim was deleted at 12.0: the preemption work from there is inside
    f = stats.window_figures("drain", 10.0, created, bound, series, first_write=12.0)
    assert f["window_s"] == pytest.approx(3.0)
    assert f["throughput"] == pytest.approx(2 / 3.0)
    assert f["cpu_ms_per_pod"] == pytest.approx(3000.0 / 2)
    assert f["startup_s"] == pytest.approx(2.0)
    assert f["window_opened_by"] == "first write"
    # a write after the first bind, or before the contender started, changes nothing
    for late in (14.5, 9.0):
        g = stats.window_figures("drain", 10.0, created, bound, series, first_write=late)
        assert g["window_s"] == pytest.approx(1.0)
        assert g["cpu_ms_per_pod"] == pytest.approx(1000.0)
        assert g["window_opened_by"] == "first bind"


def test_preemptors_bound_in_the_window_count_in_the_any_bound_pod_figure() -> None:
    created = {"m0": 0.0, "m1": 0.0}
    bound = {"m0": 12.0, "m1": 14.0}
    series = [(10.0, 0.0), (20.0, 10.0)]
    # window 12..14: p1 inside, p0 before it, p2 after it
    f = stats.window_figures(
        "drain", 10.0, created, bound, series, also_bound={"p0": 11.0, "p1": 13.0, "p2": 15.0}
    )
    assert f["also_bound_in_window"] == 1
    assert f["cpu_ms_per_pod"] == pytest.approx(2000.0 / 1)
    assert f["cpu_ms_per_any_bound_pod"] == pytest.approx(2000.0 / 2)
    assert "also_bound_in_window" not in stats.window_figures("drain", 10.0, created, bound, series)


def test_render_adds_the_any_bound_pod_figure_under_the_table_for_preemptor_churn() -> None:
    runs = [
        _run(500, "PreemptionAsync", "drain", "upstream", 4.0),
        _run(500, "PreemptionAsync", "drain", "ours-async", 2.0),
    ]
    for run, (extra, per_any) in zip(runs, [(10, 3.0), (20, 1.0)], strict=True):
        run["measured"]["also_bound_in_window"] = extra
        run["measured"]["cpu_ms_per_any_bound_pod"] = per_any
    text = pinned_report.render(_doc(runs), "x.json")
    line = next(x for x in text.splitlines() if x.startswith("PreemptionAsync (drain)"))
    assert "(10 · 20)" in line and "3.00 / 1.00 (0.33x)" in line


def test_gang_workloads_run_only_when_named_and_hold_whole_groups() -> None:
    default = pw.select([5000])
    assert not any(w.gangs for w in default)  # the gate would change upstream's profile
    gangs = pw.select([5000], ["GangScheduling", "GangScheduling1000PerGroup"])
    assert [(w.name, w.group_size, w.measured_pods) for w in gangs] == [
        ("GangScheduling", 3, 3000),
        ("GangScheduling1000PerGroup", 1000, 3000),
    ]
    w = gangs[0]
    groups = list(pw.pod_groups(w, 7))
    assert len(groups) == 1000
    assert groups[0]["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    members = list(pw.measured_pods(w, 7))
    refs = [p["spec"]["schedulingGroup"]["podGroupName"] for p in members]
    assert refs[:4] == ["gang7-0", "gang7-0", "gang7-0", "gang7-1"]
    assert {g["metadata"]["name"] for g in groups} == set(refs)
    # a plain workload's pods name no group, and it has no PodGroups
    plain = default[0]
    assert "schedulingGroup" not in next(pw.measured_pods(plain))["spec"]
    assert list(pw.pod_groups(plain)) == []
    # the gang-preemption shape: ten 40m pods a node, members that need a node emptied
    (pre,) = pw.select([100], ["GangPreemptionBasic"])
    assert (pre.init_pods, pre.measured_pods, pre.group_size, pre.preemptor_role) == (
        1000, 100, 10, "measured",
    )  # fmt: skip
    (group, *_) = pw.pod_groups(pre)
    assert group["spec"]["priorityClassName"] == next(pw.measured_pods(pre))["spec"][
        "priorityClassName"
    ]
    with pytest.raises(ValueError, match="whole groups"):
        pw.PinnedWorkload("G", 10, "plain", 0, "gang", 10, group_size=3)


def test_pod_group_attempts_show_side_by_side_under_the_table_of_gang_runs_only() -> None:
    runs = [
        _run(500, "SchedulingBasic", "drain", "upstream", 2.0),
        _run(500, "SchedulingBasic", "drain", "ours-async", 1.0),
        _run(500, "GangScheduling", "drain", "upstream", 4.0),
        _run(500, "GangScheduling", "drain", "ours-async", 1.0),
    ]
    for run, (sched, every) in zip(runs[2:], [((100, 4.0), (100, 4.0)), ((100, 1.0), (103, 2.0))],
                                   strict=True):  # fmt: skip
        run["pod_group_attempts"] = {
            "scheduled": {"attempts": sched[0], "mean_ms": sched[1]},
            "all": {"attempts": every[0], "mean_ms": every[1]},
        }
    doc = _doc(runs)
    by = pinned_report.rows(doc)[(500, "GangScheduling", "drain")]
    assert pinned_report.ratios(by)["pg_scheduled_ms"] == pytest.approx(0.25)
    text = pinned_report.render(doc, "x.json")
    line = next(x for x in text.splitlines() if x.startswith("| GangScheduling | drain | 4.00"))
    assert line == (
        "| GangScheduling | drain | 4.00 / 1.00 (0.25x) | 100 / 100 (1.00x) | "
        "4.00 / 2.00 (0.50x) | 100 / 103 (1.03x) |"
    )
    assert text.count("| mean ms, scheduled |") == 1  # one pod-group table, for the gangs
    main = next(x for x in text.splitlines() if x.startswith("| workload | shape | pods bound"))
    assert "pod-group" not in main and "attempt" not in main  # no empty columns elsewhere
    assert pinned_report.pod_group_tables(doc)[1:] == pinned_report.pod_group_table(
        pinned_report.rows(doc), 500
    )
    # a matrix without gangs prints nothing more
    assert pinned_report.pod_group_tables(_doc(runs[:2])) == []
    assert "mean ms, scheduled" not in pinned_report.render(_doc(runs[:2]), "x.json")
