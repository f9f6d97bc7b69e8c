"""The pieces of the real-node mode that need no root: the containerd and kubelet
configurations, the pause image archive, the ServiceMonitor made static and the
dashboard's queries filled in. (The node itself is exercised by tests/e2e.)"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from kas_dev.cluster import prometheus, realnode, realnode_config
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.pause_image import PAUSE_IMAGE, oci_archive

ROOT = Path(__file__).resolve().parents[2]
NODE = realnode_config.RealNode(
    name="vm",
    dir="/c/nodes/vm",
    socket="/c/nodes/vm/containerd.sock",
    cgroup_root="/kas-1234-vm",
    kubelet_port=20001,
    healthz_port=20002,
)


def test_containerd_config_is_private_and_loopback_only() -> None:
    cfg = realnode_config.containerd_config(NODE, "/usr/lib/cni", "/usr/sbin/runc")
    assert 'root = "/c/nodes/vm/containerd/root"' in cfg
    assert 'state = "/c/nodes/vm/containerd/state"' in cfg
    assert 'address = "/c/nodes/vm/containerd.sock"' in cfg
    assert "restrict_oom_score_adj = true" in cfg
    assert f'sandbox_image = "{PAUSE_IMAGE}"' in cfg
    assert 'stream_server_address = "127.0.0.1"' in cfg
    assert 'Root = "/c/nodes/vm/runc"' in cfg
    assert "SystemdCgroup = false" in cfg
    assert [p["type"] for p in realnode_config.LOOPBACK_CNI["plugins"]] == ["loopback"]


def test_kubelet_config_serves_on_loopback_with_cgroupfs() -> None:
    cfg = realnode_config.kubelet_config(NODE, Path("/c/pki/ca.crt"))
    assert cfg["address"] == cfg["healthzBindAddress"] == "127.0.0.1"
    assert cfg["readOnlyPort"] == 0
    assert cfg["cgroupDriver"] == "cgroupfs" and cfg["cgroupRoot"] == "/kas-1234-vm"
    assert cfg["failCgroupV1"] is False and cfg["failSwapOn"] is False
    assert cfg["containerRuntimeEndpoint"] == "unix:///c/nodes/vm/containerd.sock"
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    # nothing of the kubelet outside the node's folder
    assert cfg["podLogsDir"].startswith("/c/nodes/vm/")
    assert cfg["volumePluginDir"].startswith("/c/nodes/vm/")


def test_too_many_real_nodes_is_a_clear_error() -> None:
    with pytest.raises(ClusterError, match=r"host names resolving to 127\.0\.0\.1"):
        realnode.loopback_names(50)


def test_pause_archive_is_a_valid_one_layer_oci_layout(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    with tarfile.open(fileobj=io.BytesIO(oci_archive(binary))) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    index = json.loads(files["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == PAUSE_IMAGE
    # every blob is stored under its own digest
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert name.rsplit("/", 1)[1] == hashlib.sha256(data).hexdigest()
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].split(":")[1]])
    (layer,) = manifest["layers"]
    layer_tar = files["blobs/sha256/" + layer["digest"].split(":")[1]]
    with tarfile.open(fileobj=io.BytesIO(layer_tar)) as lt:
        (member,) = lt.getmembers()
    assert member.name == "pause" and member.mode == 0o755
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]


SERVICE_MONITOR = {
    "kind": "ServiceMonitor",
    "spec": {
        "endpoints": [
            {
                "port": "https",
                "path": "/metrics",
                "scheme": "https",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "tlsConfig": {"insecureSkipVerify": True},
                "interval": "30s",
                "scrapeTimeout": "10s",
            }
        ]
    },
}


def test_service_monitor_becomes_a_static_scrape_config() -> None:
    token = Path("/c/prometheus-token")
    (cfg,) = prometheus.scrape_config(
        SERVICE_MONITOR, "kas-metrics", ["127.0.0.1:10259"], token_file=token
    )
    assert cfg == {
        "job_name": "kas-metrics",
        "metrics_path": "/metrics",
        "scheme": "https",
        "authorization": {"type": "Bearer", "credentials_file": str(token)},
        "tls_config": {"insecure_skip_verify": True},
        "scrape_interval": "30s",
        "scrape_timeout": "10s",
        "static_configs": [{"targets": ["127.0.0.1:10259"], "labels": {"job": "kas-metrics"}}],
    }
    with pytest.raises(ClusterError, match="token_file"):
        prometheus.scrape_config(SERVICE_MONITOR, "kas-metrics", ["127.0.0.1:10259"])


def test_relabelings_are_refused_rather_than_dropped() -> None:
    sm = json.loads(json.dumps(SERVICE_MONITOR))
    sm["spec"]["endpoints"][0]["relabelings"] = [{"action": "drop"}]
    with pytest.raises(ClusterError, match="relabelings"):
        prometheus.scrape_config(sm, "kas-metrics", ["127.0.0.1:1"])


def test_every_dashboard_panel_query_is_filled_in() -> None:
    dashboard = json.loads(
        (ROOT / "charts/kube-async-scheduler/dashboards/kube-async-scheduler.json").read_text()
    )
    queries = prometheus.dashboard_queries(dashboard, "kas-metrics")
    assert len(queries) >= 10
    for expr in queries.values():
        assert "$" not in expr, expr
        assert 'job=~"kas-metrics"' in expr, expr
