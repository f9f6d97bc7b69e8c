"""A pod's volumes as the volume plugins read them: the claim each one uses (a
persistentVolumeClaim, or a generic ephemeral volume's claim named
"<pod>-<volume>", upstream ephemeral.VolumeClaimName) and the inline disks whose
sharing VolumeRestrictions checks (GCE PD, AWS EBS, iSCSI, RBD)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """One inline disk: `kind` is gce | aws | iscsi | rbd; `ident` what names the disk
    (PD name, volume ID, IQN, pool/image); `monitors` for RBD."""

    kind: str
    ident: str
    read_only: bool = False
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: InlineDisk) -> bool:
        """upstream volumerestrictions isVolumeConflict, for one pair of volumes."""
        if self.kind != other.kind or self.ident != other.ident:
            return False
        if self.kind == "aws":  # EBS: any second use conflicts, read-only or not
            return True
        if self.kind == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class PodVolume:
    name: str
    claim_name: str = ""  # "" when the volume uses no claim
    ephemeral: bool = False  # the claim is a generic ephemeral volume's
    disk: InlineDisk | None = None
    csi_driver: str = ""  # an inline CSI volume's driver


def _inline_disk(v: Mapping[str, Any]) -> InlineDisk | None:
    gce = v.get("gcePersistentDisk")
    if isinstance(gce, Mapping):
        return InlineDisk("gce", str(gce.get("pdName") or ""), bool(gce.get("readOnly")))
    aws = v.get("awsElasticBlockStore")
    if isinstance(aws, Mapping):
        return InlineDisk("aws", str(aws.get("volumeID") or ""), bool(aws.get("readOnly")))
    iscsi = v.get("iscsi")
    if isinstance(iscsi, Mapping):
        return InlineDisk("iscsi", str(iscsi.get("iqn") or ""), bool(iscsi.get("readOnly")))
    rbd = v.get("rbd")
    if isinstance(rbd, Mapping):
        pool = str(rbd.get("pool") or "rbd")  # the API server defaults pool to "rbd"
        return InlineDisk(
            "rbd",
            f"{pool}/{rbd.get('image') or ''}",
            bool(rbd.get("readOnly")),
            frozenset(str(m) for m in rbd.get("monitors") or []),
        )
    return None


def parse_pod_volumes(raw: Any, pod_name: str) -> tuple[PodVolume, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidObject("spec.volumes", "must be a list")
    out: list[PodVolume] = []
    for i, v in enumerate(raw):
        if not isinstance(v, Mapping):
            raise InvalidObject(f"spec.volumes[{i}]", "must be an object")
        name = str(v.get("name") or "")
        claim = v.get("persistentVolumeClaim")
        if isinstance(claim, Mapping):
            cn = claim.get("claimName")
            if not isinstance(cn, str) or not cn:
                raise InvalidObject(
                    f"spec.volumes[{i}].persistentVolumeClaim.claimName", "must be set"
                )
            out.append(PodVolume(name, cn))
        elif isinstance(v.get("ephemeral"), Mapping):
            out.append(PodVolume(name, f"{pod_name}-{name}", ephemeral=True))
        else:
            csi = v.get("csi")
            driver = str(csi.get("driver") or "") if isinstance(csi, Mapping) else ""
            out.append(PodVolume(name, disk=_inline_disk(v), csi_driver=driver))
    return tuple(out)
