"""A pod's host ports (v1.ContainerPort.hostPort) as NodePorts compares them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Same protocol and port, and either side binds every address or both bind
        the same address (upstream HostPortInfo)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip in ("0.0.0.0", other.host_ip) or other.host_ip == "0.0.0.0"


def parse_host_ports(
    containers: Iterable[tuple[Any, str]], problems: list[str]
) -> tuple[HostPort, ...]:
    """Every host port; one that cannot be read is reported and skipped, the others
    still count."""
    out: list[HostPort] = []
    for c, path in containers:
        ports = c.get("ports")
        if ports is None:
            continue
        if not isinstance(ports, list):
            problems.append(str(InvalidObject(f"{path}.ports", "must be a list")))
            continue
        for j, p in enumerate(ports):
            hp = p.get("hostPort") if isinstance(p, dict) else None
            if not isinstance(p, dict) or (
                hp is not None and (isinstance(hp, bool) or not isinstance(hp, int))
            ):
                problems.append(str(InvalidObject(f"{path}.ports[{j}]", "unreadable port")))
                continue
            if not hp or hp <= 0:
                continue
            out.append(
                HostPort(str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), hp)
            )
    return tuple(out)
