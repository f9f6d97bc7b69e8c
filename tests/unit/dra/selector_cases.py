"""Upstream's CEL selector cases, as data: the table of TestCEL in
k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile_test.go, restricted to the
features kube-scheduler v1.37.2 runs with by default (DRAConsumableCapacity on, so
`device.allowMultipleAllocations` is declared; DRAListTypeAttributes off, so attributes
are scalars and `includes` is undeclared) and to the stored-expressions environment the
scheduler compiles with (cel/cache.go GetOrCompile).

Each case names its upstream key. The expected outcome is upstream's: a match (True or
False), or a substring of the compile or evaluation error. Upstream's cost figures are
left out: the scheduler compiles with cost estimation off (cache.go), and the API
server refuses a selector whose estimated cost is over the limit before it is stored.

A few cases of our own follow upstream's (marked "extra"): the syntax the Kubernetes
documentation recommends for optional attributes, which upstream's environment accepts
(optional types are part of the base environment, apiserver/pkg/cel/environment/base.go).

Both the unit tests of scheduler.dra and hack/cel_scorecard.py (which tries Python CEL
libraries on the same cases) read this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# attribute values: {"bool": True} | {"int": 1} | {"string": "x"} | {"version": "1.0.0"}
Attribute = dict[str, object]


@dataclass(frozen=True)
class SelectorCase:
    name: str
    expression: str
    driver: str = ""
    # qualified name -> one attribute value (`{"int": 1}`): unqualified names belong to
    # the driver's domain (cel/compile.go parseQualifiedName)
    attributes: dict[str, Attribute] = field(default_factory=dict)
    # qualified name -> quantity string
    capacity: dict[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool | None = None
    expect_match: bool = False
    expect_match_error: str = ""
    expect_compile_error: str = ""


DRA = "dra.example.com"

CASES: tuple[SelectorCase, ...] = (
    SelectorCase("true", "true", expect_match=True),
    SelectorCase("false", "false", expect_match=False),
    SelectorCase("syntax-error", "?!", expect_compile_error="Syntax error"),
    SelectorCase(
        "type-error",
        "1",
        expect_compile_error="must evaluate to bool or the unknown type, not int",
    ),
    SelectorCase(
        "runtime-error",
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        expect_match_error="no such key: noSuchAttr",
    ),
    SelectorCase(
        "runtime-error-lookup-identifier",
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        expect_match_error="no such key: noSuchAttr",
    ),
    SelectorCase("domain-check-negative", '"no-such-domain" in device.attributes'),
    SelectorCase(
        "domain-check-positive",
        f'"{DRA}" in device.attributes',
        attributes={f"{DRA}/something": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase("empty-driver-name", 'device.driver == ""', expect_match=True),
    SelectorCase("real-driver-name", f'device.driver == "{DRA}"', driver=DRA, expect_match=True),
    SelectorCase(
        "driver-name-qualifier",
        f'device.attributes["{DRA}"].name',
        driver=DRA,
        attributes={"name": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "driver-name-qualifier-map-lookup",
        f'device.attributes["{DRA}"]["name"]',
        driver=DRA,
        attributes={"name": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "bind",
        f'cel.bind(dra, device.attributes["{DRA}"], dra.name)',
        driver=DRA,
        attributes={"name": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "qualified-attribute-name",
        'device.attributes["other.example.com"].name',
        driver=DRA,
        attributes={"other.example.com/name": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "bool",
        f'device.attributes["{DRA}"].name',
        driver=DRA,
        attributes={"name": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "int",
        f'device.attributes["{DRA}"].name > 0',
        driver=DRA,
        attributes={"name": {"int": 1}},
        expect_match=True,
    ),
    SelectorCase(
        "string",
        f'device.attributes["{DRA}"].name == "fish"',
        driver=DRA,
        attributes={"name": {"string": "fish"}},
        expect_match=True,
    ),
    SelectorCase(
        "version",
        f'device.attributes["{DRA}"].name.isGreaterThan(semver("0.0.1"))',
        driver=DRA,
        attributes={"name": {"version": "1.0.0"}},
        expect_match=True,
    ),
    SelectorCase(
        "version_v",
        f'device.attributes["{DRA}"].name.isGreaterThan(semver("v0.0.1", true))'
        ' && isSemver("v1.0.0", true)',
        driver=DRA,
        attributes={"name": {"version": "1.0.0"}},
        expect_match=True,
    ),
    SelectorCase(
        "quantity",
        f'device.capacity["{DRA}"].name.isGreaterThan(quantity("1Ki"))',
        driver=DRA,
        capacity={"name": "1Mi"},
        expect_match=True,
    ),
    SelectorCase(
        "check-positive",
        f'"name" in device.capacity["{DRA}"]'
        f' && device.capacity["{DRA}"].name.isGreaterThan(quantity("1Ki"))',
        driver=DRA,
        capacity={"name": "1Mi"},
        expect_match=True,
    ),
    SelectorCase(
        "check-negative",
        f'!("name" in device.capacity["{DRA}"])'
        f' || device.capacity["{DRA}"].name.isGreaterThan(quantity("1Ki"))',
        expect_match=True,
    ),
    SelectorCase(
        "all",
        " && ".join(
            (
                f'device.capacity["{DRA}"].quantity.isGreaterThan(quantity("1Ki"))',
                f'device.attributes["{DRA}"].bool',
                f'device.attributes["{DRA}"].int > 0',
                f'device.attributes["{DRA}"].string == "fish"',
                f'device.attributes["{DRA}"].version.isGreaterThan(semver("0.0.1"))',
                f'device.capacity["{DRA}"]["quantity"].isGreaterThan(quantity("1Ki"))',
                f'device.attributes["{DRA}"]["bool"]',
                f'device.attributes["{DRA}"]["int"] > 0',
                f'device.attributes["{DRA}"]["string"] == "fish"',
                f'device.attributes["{DRA}"]["version"].isGreaterThan(semver("0.0.1"))',
            )
        ),
        driver=DRA,
        attributes={
            "bool": {"bool": True},
            "int": {"int": 1},
            "string": {"string": "fish"},
            "version": {"version": "1.0.0"},
        },
        capacity={"quantity": "1Mi"},
        expect_match=True,
    ),
    SelectorCase(
        "many",
        f'device.attributes["{DRA}"].a && device.attributes["{DRA}"].b'
        f' && device.attributes["{DRA}"].c',
        driver=DRA,
        attributes={"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}},
        expect_match=True,
    ),
    SelectorCase(
        "check_attribute_domains",
        f'device.attributes.exists_one(x, x == "{DRA}")',
        driver=DRA,
        attributes={"services": {"string": "some_example_value"}},
        expect_match=True,
    ),
    SelectorCase(
        "check_attribute_ids",
        f'device.attributes["{DRA}"].exists_one(x, x == "services")',
        driver=DRA,
        attributes={"services": {"string": "some_example_value"}},
        expect_match=True,
    ),
    SelectorCase(
        "split_attribute",
        f'device.attributes["{DRA}"].services.split("example").size() >= 2',
        driver=DRA,
        attributes={"services": {"string": "some_example_value"}},
        expect_match=True,
    ),
    SelectorCase(
        "regexp_attribute",
        f'device.attributes["{DRA}"].services.matches("[^a]?sym")',
        driver=DRA,
        attributes={"services": {"string": "asymetric"}},
        expect_match=True,
    ),
    SelectorCase(
        "check_capacity_domains",
        f'device.capacity.exists_one(x, x == "{DRA}")',
        driver=DRA,
        capacity={"memory": "1Mi"},
        expect_match=True,
    ),
    SelectorCase(
        "check_capacity_ids",
        f'device.capacity["{DRA}"].exists_one(x, x == "memory")',
        driver=DRA,
        capacity={"memory": "1Mi"},
        expect_match=True,
    ),
    SelectorCase(
        "allow_multiple_allocations",
        "device.allowMultipleAllocations == true",
        driver=DRA,
        allow_multiple_allocations=True,
        expect_match=True,
    ),
    SelectorCase(
        "allow_multiple_allocations_default",
        "device.allowMultipleAllocations == false",
        driver=DRA,
        expect_match=True,
    ),
    SelectorCase(
        "allow_multiple_allocations_false",
        "device.allowMultipleAllocations == false",
        driver=DRA,
        allow_multiple_allocations=False,
        expect_match=True,
    ),
    SelectorCase(
        "includes-undeclared",
        f'device.attributes["{DRA}"].attr.includes("fish")',
        driver=DRA,
        expect_compile_error="undeclared reference to 'includes'",
    ),
    # extra: optional attributes as the Kubernetes documentation writes them
    SelectorCase(
        "extra-optional-field-absent",
        f'device.attributes["{DRA}"].?model.orValue("") == ""',
        driver=DRA,
        expect_match=True,
    ),
    SelectorCase(
        "extra-optional-index-present",
        f'device.attributes["{DRA}"][?"model"].orValue("") == "a100"',
        driver=DRA,
        attributes={"model": {"string": "a100"}},
        expect_match=True,
    ),
    SelectorCase(
        "extra-has-on-default-domain",
        f'has(device.attributes["{DRA}"].model)',
        driver="other.example.com",
        expect_match=False,
    ),
    SelectorCase(
        "extra-semver-compare",
        f'device.attributes["{DRA}"].v.compareTo(semver("1.2.0-rc.1")) > 0',
        driver=DRA,
        attributes={"v": {"version": "1.2.0"}},
        expect_match=True,
    ),
    SelectorCase(
        "extra-quantity-arithmetic",
        f'device.capacity["{DRA}"].memory.sub(quantity("512Mi")).compareTo(quantity("0.5Gi")) == 0',
        driver=DRA,
        capacity={"memory": "1Gi"},
        expect_match=True,
    ),
    SelectorCase(
        "extra-lower-ascii",
        f'device.attributes["{DRA}"].model.lowerAscii() == "a100"',
        driver=DRA,
        attributes={"model": {"string": "A100"}},
        expect_match=True,
    ),
)
