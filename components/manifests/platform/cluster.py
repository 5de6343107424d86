"""The ACK add-ons a platform needs, derived from its spec rather than listed by hand."""

from __future__ import annotations

import json

from ...config import PlatformSpec

NETWORK_PLUGIN = "flannel"
CREATION_ADDONS = (NETWORK_PLUGIN, "csi-plugin", "csi-provisioner")
"""Chosen when the cluster is created: the network plugin can be chosen only then
(``pod_cidr`` means Flannel), and NAS volumes need the CSI driver from the start."""
NETWORK_ADDONS = {
    "flannel": (NETWORK_PLUGIN, None),
    # Terway in shared-ENI mode, with its NetworkPolicy enforcement on (pulumi-alicloud 4.x
    # cs/managed_kubernetes.py examples name the add-on terway-eniip with a NetworkPolicy
    # switch; ACK: "Use network policies in ACK clusters", shared ENI mode only).
    "terway": ("terway-eniip", json.dumps({"NetworkPolicy": "true"})),
}


def creation_addons(network: str) -> list[tuple[str, str | None]]:
    """The add-ons a new cluster is created with, and their configuration: the pod network
    (``cluster.network``, fixed for the cluster's life: ACK, "Network overview") and CSI."""
    return [NETWORK_ADDONS[network], *((name, None) for name in CREATION_ADDONS[1:])]


BASE_ADDONS = ("storage-operator", "ack-node-problem-detector")
NODE_REPAIR_ADDON = "node-lifecycle-controller"
"""Node pool auto-repair needs it beside ack-node-problem-detector (pulumi-alicloud 4.0.0,
``cs.NodePoolManagementArgs.auto_repair``)."""
ACR_HELPER_ADDON = "managed-aliyun-acr-credential-helper"
ARMS_ADDON = "arms-prometheus"
"""ACK's managed Prometheus agent: it creates the cluster's ARMS Prometheus instance, named by the
cluster id, and runs kube-state-metrics (ACK: "ack-arms-prometheus")."""


def cluster_addons(spec: PlatformSpec) -> list[str]:
    """Add-ons managed as resources of their own, so that editing the list changes the
    cluster (``ManagedKubernetes.addons`` applies at creation only). An adopted cluster
    gets the CSI pair here too: installing an add-on that is there already adopts it."""
    repair = spec.cluster.has_system_pool or (spec.gpu_pool is not None and spec.gpu_pool.auto_repair)
    names = [
        *(() if spec.cluster.creates_cluster else CREATION_ADDONS[1:]),
        *BASE_ADDONS,
        *((NODE_REPAIR_ADDON,) if repair else ()),
        *((ARMS_ADDON,) if spec.prometheus == "arms" else ()),
        *spec.cluster.addons,
    ]
    return [name for i, name in enumerate(names) if name not in names[:i] and name not in CREATION_ADDONS[:1]]


def acr_helper_config(instance_id: str, region: str, namespaces: list[str]) -> str:
    """Configuration of the password-free ACR credential helper: which enterprise instance
    it logs in to, and the namespaces whose service accounts get its pull credentials
    (ACR: "Pull images without a secret"; every service account there: ``*``)."""
    return json.dumps(
        {
            "AcrInstanceInfo": [{"instanceId": instance_id, "regionId": region}],
            "watchNamespace": ",".join(namespaces),
            "serviceAccount": "*",
            "expiringThreshold": "15m",
        },
        sort_keys=True,
    )
