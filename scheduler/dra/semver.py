"""Semantic versions as Kubernetes' CEL semver library reads them.

Upstream parses with github.com/blang/semver/v4 (`semver.Parse`: MAJOR.MINOR.PATCH, an
optional pre-release after "-" and build metadata after "+", no leading zeros in numeric
parts) and, for `semver(s, true)`, first normalizes the text
(k8s.io/apiserver@v0.37.2/pkg/cel/library/semverlib.go normalizeAndParse: a leading "v"
dropped, missing minor and patch filled with 0, leading zeros trimmed). Ordering is
Semantic Versioning 2.0's: build metadata is ignored, a release sorts after its
pre-releases, numeric identifiers sort numerically and before alphanumeric ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_IDENT = re.compile(r"[0-9A-Za-z-]+")


class InvalidSemver(ValueError):
    """The text is not a semantic version; the message is the reason."""


@total_ordering
@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 (blang's Version.Compare: build metadata ignored)."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.pre or not other.pre:
            # a release is newer than any of its pre-releases
            return (not self.pre) - (not other.pre)
        for a, b in zip(self.pre, other.pre, strict=False):
            order = _compare_identifier(a, b)
            if order:
                return order
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))


def _compare_identifier(a: str, b: str) -> int:
    a_num, b_num = a.isdigit(), b.isdigit()
    if a_num and b_num:
        x, y = int(a), int(b)
        return (x > y) - (x < y)
    if a_num != b_num:
        return -1 if a_num else 1  # numeric identifiers have lower precedence
    return (a > b) - (a < b)


_DIGITS = re.compile(r"[0-9]*")
_UINT64_MAX = 2**64 - 1


def go_quote(text: str) -> str:
    """Go's %q of a plain string (what blang's messages print)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(part: str, what: str) -> int:
    if not _DIGITS.fullmatch(part):
        raise InvalidSemver(f"Invalid character(s) found in {what.lower()} number {go_quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise InvalidSemver(f"{what} number must not contain leading zeroes {go_quote(part)}")
    # strconv.ParseUint's errors
    if not part:
        raise InvalidSemver('strconv.ParseUint: parsing "": invalid syntax')
    value = int(part)
    if value > _UINT64_MAX:
        raise InvalidSemver(f"strconv.ParseUint: parsing {go_quote(part)}: value out of range")
    return value


def parse_semver(text: str) -> Semver:
    """blang/semver's strict Parse, its checks in its order (so its first error is ours)."""
    if not text:
        raise InvalidSemver("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise InvalidSemver("No Major.Minor.Patch elements found")
    major = _number(parts[0], "Major")
    minor = _number(parts[1], "Minor")
    patch_text = parts[2]
    build: tuple[str, ...] = ()
    pre: tuple[str, ...] = ()
    if "+" in patch_text:
        patch_text, _, build_text = patch_text.partition("+")
        build = tuple(build_text.split("."))
    if "-" in patch_text:
        patch_text, _, pre_text = patch_text.partition("-")
        pre = tuple(pre_text.split("."))
    patch = _number(patch_text, "Patch")
    for ident in pre:
        if not ident:
            raise InvalidSemver("Prerelease is empty")
        if _DIGITS.fullmatch(ident):
            if len(ident) > 1 and ident[0] == "0":
                raise InvalidSemver(
                    "Numeric PreRelease version must not contain leading zeroes " + go_quote(ident)
                )
        elif not _IDENT.fullmatch(ident):
            raise InvalidSemver(f"Invalid character(s) found in prerelease {go_quote(ident)}")
    for ident in build:
        if not ident:
            raise InvalidSemver("Build meta data is empty")
        if not _IDENT.fullmatch(ident):
            raise InvalidSemver(f"Invalid character(s) found in build meta data {go_quote(ident)}")
    return Semver(major, minor, patch, pre, build)


def normalize_and_parse(text: str) -> Semver:
    """`semver(s, true)`: semverlib.go normalizeAndParse, then the strict parse."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise InvalidSemver("short version cannot contain PreRelease/Build meta data")
        parts.extend("0" * (3 - len(parts)))
    return parse_semver(".".join(parts))
