"""Which ResourceClaims a pod uses, with upstream's messages when one cannot be used yet
(k8s.io/dynamic-resource-allocation@v0.37.2 resourceclaim/resourceclaim.go: Name,
IsForPod, IsReservedForPod; kubernetes@v1.37.2 pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go: foreachPodResourceClaim). The messages are the
reasons of the pod's FailedScheduling event, word for word.

Upstream's DRAWorkloadResourceClaims (claims of a PodGroup) is off in v1.37.2, so a
claim made from a template must be controlled by the pod itself.
"""

from __future__ import annotations

from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import ClaimRecord
from scheduler.model.pod import PodInfo
from scheduler.model.pod_claims import PodResourceClaim


class ClaimNotUsable(Exception):
    """The pod cannot be scheduled yet because of one of its claims; the text is
    upstream's."""


def claim_name(pod: PodInfo, entry: PodResourceClaim) -> tuple[str | None, bool]:
    """resourceclaim.Name: the claim an entry of spec.resourceClaims names (None: the
    controller decided none is needed), and whether it must be checked to belong to the
    pod (a template's claim)."""
    if entry.claim_name is not None:
        return entry.claim_name, False
    if entry.template_name is not None:
        for name, claim in pod.resource_claim_statuses:
            if name == entry.name:
                return claim, True
        raise ClaimNotUsable(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
    raise ClaimNotUsable(
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{entry.name}": '
        "none of the supported fields are set"
    )


def _check_for_pod(pod: PodInfo, claim: ClaimRecord) -> None:
    """resourceclaim.IsForPod without a PodGroup owner."""
    if claim.namespace != pod.namespace:
        raise ClaimNotUsable(
            f"ResourceClaim {claim.namespace}/{claim.name} is not in the same namespace "
            f"as Pod {pod.namespace}/{pod.name}"
        )
    if claim.controller_uid != pod.uid:
        raise ClaimNotUsable(
            f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
            f"{pod.namespace}/{pod.name} (Pod is not owner)"
        )


def pod_claims(pod: PodInfo, state: DeviceState) -> list[ClaimRecord]:
    """foreachPodResourceClaim: the pod's claims in spec order (entries the controller
    left without a claim skipped), as the claim cache sees them; raises ClaimNotUsable
    for the first that is missing, being deleted or not the pod's."""
    claims = []
    for entry in pod.resource_claims:
        name, must_check_owner = claim_name(pod, entry)
        if name is None:
            continue
        claim = state.get_claim(pod.namespace, name)
        if claim is None:
            # the assume cache's NotFoundError (scheduler.go names its cache "ResourceClaim")
            raise ClaimNotUsable(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if claim.deleting:
            raise ClaimNotUsable(f'resourceclaim "{claim.name}" is being deleted')
        if must_check_owner:
            _check_for_pod(pod, claim)
        claims.append(claim)
    return claims


def reserved_for_pod(pod: PodInfo, claim: ClaimRecord) -> bool:
    """resourceclaim.IsReservedForPod without PodGroup reservations."""
    return any(r.uid == pod.uid for r in claim.reserved_for)
