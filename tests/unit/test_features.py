"""--feature-gates: kube-scheduler's syntax, only the gates this scheduler acts on."""

from __future__ import annotations

import pytest

from scheduler.cli import main
from scheduler.features import FeatureGateError, FeatureGates, parse_feature_gates


def test_generic_workload_is_off_by_default_and_read_as_component_base_reads_it() -> None:
    assert parse_feature_gates("") == FeatureGates()
    assert parse_feature_gates(" GenericWorkload=TRUE ") == FeatureGates(generic_workload=True)
    assert parse_feature_gates("GenericWorkload=true,GenericWorkload=false") == FeatureGates()
    assert FeatureGates(generic_workload=True).args() == ["--feature-gates=GenericWorkload=true"]
    both = parse_feature_gates("GenericWorkload=true, DynamicResourceAllocation=true")
    assert both == FeatureGates(generic_workload=True, dynamic_resource_allocation=True)
    assert both.args() == ["--feature-gates=GenericWorkload=true,DynamicResourceAllocation=true"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("DRAAdminAccess=true", "unrecognized feature gate: DRAAdminAccess"),
        ("GenericWorkload", "missing bool value for GenericWorkload"),
        ("GenericWorkload=yes", "invalid value of GenericWorkload=yes, err: not a bool"),
    ],
)
def test_a_bad_gate_is_one_clear_error(value: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as err:
        parse_feature_gates(value)
    assert str(err.value) == message


def test_the_cli_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--feature-gates", "Nope=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "kube-async-scheduler: error: invalid argument for --feature-gates: "
        "unrecognized feature gate: Nope"
    ]
