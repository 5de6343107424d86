"""What keeps teams apart inside the cluster: each team's namespace with its Pod Security
labels and quota, the Role its members get there, the NetworkPolicies that wall its pods
in, and the identity its pods run as."""

from __future__ import annotations

from trainer.telemetry.metric_names import METRICS_PORT

from ...config import TeamSpec
from ..base import BASELINE, JOB_LABEL, MANAGED_BY, TEAM_LABEL, Manifest, pod_security_labels
from ..monitoring.tensorboard import TENSORBOARD_POD
from ..placement import GPU_RESOURCE

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
TEAM_QUOTA = "team-quota"
TEAM_ROLE = "job-user"
JOB_USER_RULES: tuple[Manifest, ...] = (
    # ack-jobs and kubectl: submit, follow, suspend and delete jobs of either backend.
    {
        "apiGroups": ["kubeflow.org"],
        "resources": ["pytorchjobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["trainjobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    # The Kubeflow SDK reads the namespace's runtime before it creates a TrainJob and each time it
    # reads one back (kubeflow 0.5.0 trainer/backends/kubernetes/backend.py get_runtime: a refusal
    # other than 404 is an error); as Kubeflow's own edit role grants (kubeflow/trainer v2.3.0
    # manifests/overlays/kubeflow-platform/kubeflow-trainer-roles.yaml).
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainingruntimes"], "verbs": ["get", "list", "watch"]},
    # Their pods are created by the operators; people only look at them, read their logs and
    # metrics (ack-jobs top reads /metrics through the API server's pod proxy) and delete a stuck one.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log", "pods/proxy"], "verbs": ["get"]},
    # The team's TensorBoard: `kubectl port-forward svc/tensorboard` reads the Service and its
    # pods, then opens the pod's port (Kubernetes "Using RBAC Authorization": the subresource
    # pods/portforward, verb create, as in the built-in edit role). The kubelet's port-forward
    # enters the pod's network namespace, past every NetworkPolicy, so it is granted for the
    # TensorBoard pod alone, by its fixed StatefulSet name (resourceNames name the object whose
    # subresource is asked for).
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/portforward"], "resourceNames": [TENSORBOARD_POD], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "resourcequotas"], "verbs": ["get", "list"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
)
"""What a team's members may do in its namespace, and nowhere else: no Secrets, no pod
creation or exec (a pod they wrote themselves could mount any claim of the namespace with
any identity), no RBAC."""


def team_namespace(team: TeamSpec, *, service_account: str) -> list[Manifest]:
    """The team's Namespace, its jobs' ServiceAccount and its ResourceQuota.

    Args:
        team: the validated team.
        service_account: name of the jobs' ServiceAccount, the same in every team.

    Returns:
        The three objects, the Namespace first.
    """
    ns = team.name
    labels = {**MANAGED_BY, TEAM_LABEL: ns}
    quota = team.quota
    hard = {
        f"requests.{GPU_RESOURCE}": str(quota.gpus),
        "requests.cpu": quota.cpu,
        "limits.cpu": quota.cpu,
        "requests.memory": quota.memory,
        "limits.memory": quota.memory,
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {**labels, **pod_security_labels(BASELINE)}},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": ns, "labels": labels},
            # The trainer never calls the Kubernetes API: its pods get no token to steal.
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": TEAM_QUOTA, "namespace": ns, "labels": labels},
            "spec": {"hard": hard},
        },
    ]


def team_access(team: TeamSpec) -> list[Manifest]:
    """The Role job users need in the team's namespace, bound to the team's members; nothing
    when the team names none."""
    if not team.members:
        return []
    ns = team.name
    labels = {**MANAGED_BY, TEAM_LABEL: ns}
    subjects = [{"kind": m.kind, "name": m.name, "apiGroup": "rbac.authorization.k8s.io"} for m in team.members]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": TEAM_ROLE, "namespace": ns, "labels": labels},
            "rules": [dict(rule) for rule in JOB_USER_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": TEAM_ROLE, "namespace": ns, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TEAM_ROLE},
            "subjects": subjects,
        },
    ]


def _policy(name: str, namespace: str, spec: Manifest) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, TEAM_LABEL: namespace}},
        "spec": spec,
    }


DNS_PEER: Manifest = {
    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
"""The cluster's DNS service: CoreDNS's pods in ``kube-system``, labelled as Kubernetes' own
CoreDNS add-on labels them (kubernetes/kubernetes ``cluster/addons/dns/coredns/coredns.yaml.base``:
``k8s-app: kube-dns``); the API server labels every namespace with its name."""
DNS_PORTS = ({"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53})
"""DNS answers over UDP, and over TCP when an answer does not fit a datagram (RFC 7766)."""


def team_network_policies(namespace: str, *, scraper_namespace: str | None = None) -> list[Manifest]:
    """A team namespace's baseline: nothing in or out, except DNS lookups to the cluster's DNS
    service and scrapes of the trainer's metrics port by the monitoring agent. Each job's own
    policy (:func:`job_network_policy`) lets its pods reach each other.

    Args:
        namespace: the team's namespace.
        scraper_namespace: the namespace of the Prometheus that scrapes the trainers, whose pods
            alone may reach the metrics port; ``None``: nothing may.
    """
    every_pod: Manifest = {}
    policies = [
        _policy("default-deny", namespace, {"podSelector": every_pod, "policyTypes": ["Ingress", "Egress"]}),
        _policy(
            "allow-dns",
            namespace,
            {
                "podSelector": every_pod,
                "policyTypes": ["Egress"],
                "egress": [{"to": [dict(DNS_PEER)], "ports": [dict(p) for p in DNS_PORTS]}],
            },
        ),
    ]
    if scraper_namespace is not None:
        scraper = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: scraper_namespace}}}
        policies.append(
            _policy(
                "allow-metrics-scrape",
                namespace,
                {
                    "podSelector": {"matchLabels": dict(MANAGED_BY)},
                    "policyTypes": ["Ingress"],
                    "ingress": [{"from": [scraper], "ports": [{"protocol": "TCP", "port": METRICS_PORT}]}],
                },
            )
        )
    return policies


def job_network_policy(job: str, namespace: str) -> Manifest:
    """Lets the pods of one job reach each other on every port (rendezvous, NCCL's sockets,
    the master port) and nothing else; other jobs' pods, even the team's own, stay out."""
    own = {"podSelector": {"matchLabels": {JOB_LABEL: job}}}
    return _policy(
        f"job-{job}",
        namespace,
        {**own, "policyTypes": ["Ingress", "Egress"], "ingress": [{"from": [own]}], "egress": [{"to": [own]}]},
    )


def run_as(team: TeamSpec) -> Manifest:
    """The pod security context of a team's pods: its uid and gid, never root.

    No ``fsGroup``: for a CSI driver whose ``fsGroupPolicy`` is ``File`` the kubelet changes
    the group of every file on the volume at each mount, whatever the access mode
    (kubernetes-csi docs, "CSI Driver fsGroup Support"): terabytes of shared data, and
    refused under ``root_squash``. The team's directories carry its gid already.
    """
    gid = team.group_id
    return {"runAsUser": team.uid, "runAsGroup": gid, "runAsNonRoot": True}


DIRECTORY_OWNER = "own-directories"


def directory_owner_job(
    team: TeamSpec,
    *,
    image: str,
    data_claim: str,
    output_claim: str,
    node_selector: dict[str, str] | None = None,
    image_pull_secret: str | None = None,
) -> Manifest:
    """A one-shot Job that gives a team its NAS directories: owned by its uid and gid, the
    data directory ``0750`` and the output directory ``0770``, nothing for anyone else.

    It runs as root with only ``CHOWN`` (within Pod Security ``baseline``), so it works only
    while the NAS access rule trusts root (``storage.nas.userAccess: no_squash``); under
    ``root_squash`` root is the anonymous user and may chown nothing.

    Args:
        team: the team.
        image: an image with ``chown`` and ``chmod`` (the team's training image).
        data_claim: the team's data claim.
        output_claim: the team's output claim.
        node_selector: where it runs (the system nodes), or ``None``.
        image_pull_secret: the registry's pull secret, or ``None``.
    """
    owner = f"{team.uid}:{team.group_id}"
    script = f"chown {owner} /mnt/data /mnt/output && chmod 0750 /mnt/data && chmod 0770 /mnt/output"
    pod: Manifest = {
        "restartPolicy": "OnFailure",
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "chown",
                "image": image,
                "command": ["sh", "-c", script],
                "securityContext": {
                    "runAsUser": 0,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
                },
                "volumeMounts": [
                    {"name": "data", "mountPath": "/mnt/data"},
                    {"name": "output", "mountPath": "/mnt/output"},
                ],
            }
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": data_claim}},
            {"name": "output", "persistentVolumeClaim": {"claimName": output_claim}},
        ],
    }
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if image_pull_secret:
        pod["imagePullSecrets"] = [{"name": image_pull_secret}]
    labels = {**MANAGED_BY, TEAM_LABEL: team.name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": DIRECTORY_OWNER, "namespace": team.name, "labels": labels},
        "spec": {"backoffLimit": 3, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }
