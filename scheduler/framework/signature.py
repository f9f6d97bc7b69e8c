"""Pod signatures for opportunistic batching (upstream KEP-5598, v1.37.2:
kube-scheduler/framework/signers.go and framework/runtime/framework.go SignPod).

A signature is what a profile's plugins read of a pod, as one hashable value: two pods
with equal signatures get the same Filter verdicts and scores on the same nodes in the
same state, so the second may reuse the first one's scored node list (batch.py).

The fragment keys are upstream's signer names; the common signers below canonicalize
the way upstream does (lists whose order does not matter are sorted) so that equal
specs give equal fragments. Values are hashable tuples instead of upstream's JSON bytes:
only equality is ever asked of a signature.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, cast

from scheduler.framework.interfaces import SignFragment, SignPlugin, declares
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import NodeSelectorTerm, Requirement

# upstream signer names (kube-scheduler/framework/signers.go)
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"

# A pod's signature: its fragments sorted by key (None: the pod cannot be signed).
PodSignature = tuple[SignFragment, ...]


def sorted_mapping(m: Mapping[str, str] | Mapping[str, int]) -> tuple[tuple[str, Hashable], ...]:
    return tuple(sorted(m.items()))


def _per_pod(signer: Callable[[PodInfo], Hashable]) -> Callable[[PodInfo], Hashable]:
    """Remember the last pod's fragment: the framework signs one pod at a time, and
    plugins share signers (four the volumes, two the resources, two the tolerations),
    so each is computed once per pod. Holds the last pod, so its identity is never
    reused for another."""
    last: list[Any] = [None, None]

    def signed(pod: PodInfo) -> Hashable:
        if last[0] is not pod:
            last[1] = signer(pod)
            last[0] = pod
        return cast(Hashable, last[1])

    signed.__doc__ = signer.__doc__
    return signed


@_per_pod
def resources_signer(pod: PodInfo) -> Hashable:
    """upstream's resources fragment: the pod's requests (overhead included)."""
    return sorted_mapping(pod.requests)


@_per_pod
def labels_signer(pod: PodInfo) -> Hashable:
    return sorted_mapping(pod.labels)


@_per_pod
def tolerations_signer(pod: PodInfo) -> Hashable:
    """upstream TolerationsSigner: the tolerations, order not mattering."""
    return tuple(
        sorted(
            pod.tolerations,
            key=lambda t: (t.key, t.value, t.operator, t.effect, t.toleration_seconds or -1),
        )
    )


def host_ports_signer(pod: PodInfo) -> Hashable:
    """upstream HostPortsSigner: the set of host port numbers (protocol and IP left out,
    as upstream does), sorted."""
    return tuple(sorted({hp.port for hp in pod.host_ports if hp.port}))


@_per_pod
def volumes_signer(pod: PodInfo) -> Hashable:
    """upstream VolumesSigner: every volume's source except configMap and secret ones
    (they never change where a pod fits and are named per pod), sorted; the volume's
    own name is not part of it. The pod record keeps of a volume what the volume
    plugins read: the claim (a generic ephemeral volume's claim is named after the pod,
    so it counts as "an ephemeral volume", as its identical template does upstream), an
    inline disk, an inline CSI driver. A volume with none of these (configMap, secret,
    emptyDir, projected, downwardAPI, ...) leaves nothing here, where upstream keeps the
    non-configMap/secret ones: two pods differing only in such a volume share a
    signature here and not upstream (no plugin here reads those volumes)."""
    out: list[Hashable] = []
    for v in pod.volumes:
        if v.ephemeral:
            out.append(("ephemeral",))
        elif v.claim_name:
            out.append(("persistentVolumeClaim", v.claim_name))
        elif v.disk is not None:
            out.append(("disk", v.disk))
        elif v.csi_driver:
            out.append(("csi", v.csi_driver))
    return tuple(sorted(out, key=repr))


def _requirement_key(r: Requirement) -> tuple[str, str, tuple[str, ...], int]:
    return (r.key, r.operator, tuple(sorted(r.values)), r.number if r.number is not None else 0)


def _term_signer(t: NodeSelectorTerm) -> Hashable:
    """upstream NodeSelectorTermSigner: requirements with sorted values, sorted."""
    return (
        tuple(sorted(_requirement_key(r) for r in t.expressions)),
        tuple(sorted(_requirement_key(r) for r in t.fields)),
        t.errors,
    )


def node_affinity_signer(pod: PodInfo) -> Hashable:
    """upstream NodeAffinitySigner: required terms and weighted preferred terms, each
    canonical and sorted (None when the pod has no node affinity)."""
    required = pod.required_node_affinity
    preferred = pod.preferred_node_affinity
    if required is None and not preferred and not pod.preferred_node_affinity_error:
        return None
    req = tuple(sorted((_term_signer(t) for t in required.terms), key=repr)) if required else ()
    pref = tuple(sorted(((p.weight, _term_signer(p.term)) for p in preferred), key=repr))
    return (req, pref, pod.preferred_node_affinity_error)


def image_names_signer(pod: PodInfo) -> Hashable:
    """upstream ImageLocality's fragment: the set of normalized image names, sorted."""
    return tuple(sorted(set(pod.images)))


def batchable(plugins: Iterable[object]) -> tuple[list[SignPlugin], list[str]]:
    """upstream computeBatchablePlugins: the distinct plugins that sign, and the names
    of those that do not (any of them turns signatures off for the profile)."""
    signers: list[SignPlugin] = []
    unsupported: list[str] = []
    seen: set[str] = set()
    for p in plugins:
        name = str(getattr(p, "name", p))
        if name in seen:
            continue
        seen.add(name)
        if declares(p, SignPlugin):
            signers.append(cast(SignPlugin, p))
        else:
            unsupported.append(name)
    return signers, unsupported


def sign_pod(signers: list[SignPlugin], pod: PodInfo) -> PodSignature | None:
    """upstream frameworkImpl.SignPod: the scheduler name and every signer's fragments;
    None as soon as one signer refuses the pod. A refusing signer is moved to the front
    of `signers`: the order changes no signature (fragments with one key agree), and
    a plugin that refuses one pod tends to refuse the next (PodTopologySpread refuses
    every pod while it has default constraints, upstream's default), so unsignable
    pods cost one call instead of a dozen."""
    fragments: dict[str, Hashable] = {SCHEDULER_NAME: pod.scheduler_name}
    for i, p in enumerate(signers):
        parts, st = p.sign_pod(pod)
        if not st.ok:
            if i:
                signers.insert(0, signers.pop(i))
            return None
        for key, value in parts:
            fragments[key] = value
    return tuple(sorted(fragments.items()))
