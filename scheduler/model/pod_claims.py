"""A pod's ResourceClaims (core/v1 PodResourceClaim and PodResourceClaimStatus): which
claim each entry of spec.resourceClaims names, directly or through a template whose claim
the resourceclaim controller creates and records in status.resourceClaimStatuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import json_list


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One entry of spec.resourceClaims: exactly one of the two names is set when the
    API server admitted the pod (None for both is a pod this scheduler refuses)."""

    name: str
    claim_name: str | None = None  # resourceClaimName: an existing claim
    template_name: str | None = None  # resourceClaimTemplateName: a claim per pod


def _optional_name(raw: Any, path: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidObject(path, "must be a string")
    return raw


def parse_pod_resource_claims(raw: Any, path: str) -> tuple[PodResourceClaim, ...]:
    claims = []
    for i, entry in enumerate(json_list(raw, path)):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise InvalidObject(where, "must be an object")
        claims.append(
            PodResourceClaim(
                name=str(entry.get("name") or ""),
                claim_name=_optional_name(
                    entry.get("resourceClaimName"), f"{where}.resourceClaimName"
                ),
                template_name=_optional_name(
                    entry.get("resourceClaimTemplateName"), f"{where}.resourceClaimTemplateName"
                ),
            )
        )
    return tuple(claims)


def parse_resource_claim_statuses(raw: Any, path: str) -> tuple[tuple[str, str | None], ...]:
    """status.resourceClaimStatuses as (entry name, claim name); a None claim name says
    the template's claim is not needed (the controller decided so)."""
    statuses = []
    for i, entry in enumerate(json_list(raw, path)):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise InvalidObject(where, "must be an object")
        statuses.append(
            (
                str(entry.get("name") or ""),
                _optional_name(entry.get("resourceClaimName"), f"{where}.resourceClaimName"),
            )
        )
    return tuple(statuses)
