"""The Kubernetes deployment's files (etc/kubernetes/) agree with each other and with the node.

No Kubernetes runs here: the manifests are read, not applied, and the image is not built
(docs/scaling.md says so). What the nodes rely on is checked: the pods find each other by the
headless Service's name, the config reaches the path the container runs, the address the
others dial is the pod's own, and a stop leaves time for the scale-down.
tests/cluster/test_kubernetes.py runs the broker.xml itself as three nodes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from artemis_py.config import load_config

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[3] / "etc" / "kubernetes"
POD_ENV = {
    "POD_IP": "10.1.2.3",
    "HOSTNAME": "artemis-py-0",
    "ARTEMIS_CLUSTER_PASSWORD": "secret",
    "ARTEMIS_DATA": "/var/lib/artemis-py/data",
}


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def kustomization() -> dict[str, Any]:
    (doc,) = documents("kustomization.yaml")
    return doc


def resources() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for name in kustomization()["resources"]:
        for doc in documents(name):
            found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def statefulset() -> dict[str, Any]:
    (sts,) = [d for (kind, _), d in resources().items() if kind == "StatefulSet"]
    return sts


def container() -> dict[str, Any]:
    (c,) = statefulset()["spec"]["template"]["spec"]["containers"]
    return c


def test_every_file_the_kustomization_names_exists() -> None:
    k = kustomization()
    named = list(k["resources"]) + [f for g in k["configMapGenerator"] for f in g["files"]]
    assert named, named
    assert all((DEPLOY / f).is_file() for f in named), named


def test_the_broker_xml_parses_as_a_pod_runs_it() -> None:
    config = load_config(DEPLOY / "broker.xml", environ=POD_ENV)
    (cc,) = config.cluster_connections
    connectors = {c.name: c for c in config.connectors}
    assert connectors[cc.connector_name].host == POD_ENV["POD_IP"]  # the address others dial
    assert cc.discovery_group_name is not None
    assert not cc.static_connectors
    assert config.ha_policy.scale_down is not None
    assert config.ha_policy.scale_down.enabled
    assert config.journal.directory.startswith(POD_ENV["ARTEMIS_DATA"])


def test_the_pods_find_each_other_by_the_headless_service() -> None:
    found = resources()
    headless = [
        d for (kind, _), d in found.items() if kind == "Service" and d["spec"].get("clusterIP")
    ]
    (service,) = headless
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True  # a starting node is found
    assert statefulset()["spec"]["serviceName"] == service["metadata"]["name"]
    stack = (DEPLOY / "jgroups-dns-ping.xml").read_text()
    query = re.search(r'dns_query="\$\{[A-Z_]+:([^}]+)\}"', stack)
    assert query is not None
    assert query.group(1) == service["metadata"]["name"]
    cluster_port = {p["port"] for p in service["spec"]["ports"]}
    assert cluster_port == {61616}  # the connector's port: DNS_PING dials it on every pod


def test_the_container_gets_the_config_the_environment_and_the_ports() -> None:
    c = container()
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    (config_path,) = c["args"]
    assert str(Path(config_path).parent) == mounts["config"]
    volumes = {v["name"]: v for v in statefulset()["spec"]["template"]["spec"]["volumes"]}
    (generator,) = kustomization()["configMapGenerator"]
    assert volumes["config"]["configMap"]["name"] == generator["name"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert "secretKeyRef" in env["ARTEMIS_CLUSTER_PASSWORD"]["valueFrom"]
    config = load_config(DEPLOY / "broker.xml", environ=POD_ENV)
    ports = {p["containerPort"] for p in c["ports"]}
    assert ports == {a.port for a in config.acceptors}
    image = (DEPLOY / "Containerfile").read_text()
    assert f"ENV ARTEMIS_DATA={mounts['data']}" in image  # the data directory is the volume


def test_a_stop_leaves_time_for_the_scale_down() -> None:
    spec = statefulset()["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"  # one node at a time
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] >= 30
    assert container()["lifecycle"]["preStop"]["exec"]["command"]
    # Exec form: artemis-py itself is PID 1 and receives the SIGTERM.
    entry = re.search(r"^ENTRYPOINT (.+)$", (DEPLOY / "Containerfile").read_text(), re.M)
    assert entry is not None
    assert json.loads(entry.group(1))[:2] == ["artemis-py", "run"]
