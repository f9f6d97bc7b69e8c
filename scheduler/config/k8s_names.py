"""Kubernetes name rules, as k8s.io/apimachinery/pkg/util/validation/validation.go states them.

Each check returns None when the name is valid, else why not (in upstream's words).
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_PATTERN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_PATTERN)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME)


def _dns_name(value: str, limit: int, pattern: re.Pattern[str], rule: str) -> str | None:
    if len(value) > limit:
        return f"must be no more than {limit} characters"
    return None if pattern.fullmatch(value) else rule


def dns1123_label(value: str) -> str | None:
    """IsDNS1123Label: a namespace name, for instance."""
    return _dns_name(
        value,
        DNS1123_LABEL_MAX,
        _DNS1123_LABEL_RE,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters"
        " or '-', and must start and end with an alphanumeric character",
    )


def dns1123_subdomain(value: str) -> str | None:
    """IsDNS1123Subdomain: most object names (a Lease), and a pod's spec.schedulerName."""
    return _dns_name(
        value,
        DNS1123_SUBDOMAIN_MAX,
        _DNS1123_SUBDOMAIN_RE,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric"
        " characters, '-' or '.', and must start and end with an alphanumeric character",
    )


def qualified_name(value: str) -> str | None:
    """IsQualifiedName: a label key or resource name, "[prefix/]name" (metav1's
    ValidateLabelName uses it)."""
    if value.count("/") > 1:
        return "a qualified name may contain at most one '/'"
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        problem = dns1123_subdomain(prefix)
        if problem is not None:
            return f"prefix part {problem}"
    if not name:
        return "name part must be non-empty"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"name part must be no more than {QUALIFIED_NAME_MAX} characters"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must"
            " start and end with an alphanumeric character"
        )
    return None
