"""The configuration files of a real node (kas_dev/cluster/realnode.py): its
containerd's, its CNI's (loopback only), its kubelet's, and the kubelet's client
certificate and kubeconfig. Pure functions of the node's folder and ports, so they are
unit-tested without root."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.pause_image import PAUSE_IMAGE
from kas_dev.cluster.ports import LOOPBACK


@dataclass
class RealNode:
    name: str
    dir: str
    socket: str
    cgroup_root: str
    kubelet_port: int
    healthz_port: int

    @property
    def containerd_name(self) -> str:
        return f"containerd-{self.name}"

    @property
    def kubelet_name(self) -> str:
        return f"kubelet-{self.name}"

    @property
    def dra_driver_name(self) -> str:
        return f"dra-driver-{self.name}"

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's folder: its configuration, credentials and root directory."""
        return Path(self.dir) / "kubelet"

    @property
    def kubelet_root_dir(self) -> Path:
        """The kubelet's --root-dir (upstream's /var/lib/kubelet): pods' volumes, and the
        plugins_registry folder where node plugins (DRA drivers) register."""
        return self.kubelet_dir / "root"

    @property
    def kubelet_kubeconfig(self) -> Path:
        """The kubelet's credentials (system:node:<name>)."""
        return self.kubelet_dir / "kubeconfig"


def containerd_config(node: RealNode, cni_bin: str, runc: str) -> str:
    d = Path(node.dir)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = "{d / "containerd/root"}"
state = "{d / "containerd/state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{node.socket}"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "containerd/opt"}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # root here lacks CAP_SYS_RESOURCE: lowering a container's oom_score_adj below ours fails
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "{LOOPBACK}"
  stream_server_port = "0"

[{cri}.cni]
  bin_dir = "{cni_bin}"
  conf_dir = "{d / "cni"}"
  max_conf_num = 1

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  Root = "{d / "runc"}"
  SystemdCgroup = false
"""


LOOPBACK_CNI = {
    "cniVersion": "0.4.0",
    "name": "kas-loopback",
    "plugins": [{"type": "loopback"}],
}


def kubelet_config(node: RealNode, ca_file: Path) -> dict[str, Any]:
    d = Path(node.dir)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": LOOPBACK,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": node.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "imageServiceEndpoint": f"unix://{node.socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        # this machine has cgroup v1 and swap may be on: both refused by default since 1.35
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(d / "pod-logs"),
        "volumePluginDir": str(d / "kubelet/volume-plugins"),
        "resolvConf": "/etc/resolv.conf",
        # images cannot be pulled again here: never collect them, never evict for disk
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "shutdownGracePeriod": "0s",
        "protectKernelDefaults": False,
        "maxPods": 110,
    }


def issue_node_cert(pki_dir: Path, name: str, out_cert: Path, out_key: Path) -> None:
    """A client certificate for system:node:<name> (group system:nodes), signed by the
    cluster CA, so the Node authorizer lets the kubelet manage its own node and pods."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{name}"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    out_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    out_key.chmod(0o600)


def node_kubeconfig(api_url: str, ca_file: Path, cert: Path, key: Path) -> str:
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": api_url, "certificate-authority-data": b64(ca_file)},
                }
            ],
            "users": [
                {
                    "name": "node",
                    "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "node"}}],
            "current-context": "local",
        }
    )
