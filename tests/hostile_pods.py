"""Hostile pods, one change each to a pod the platform emits: every attack on a team's boundary
that the admission policy and Pod Security must refuse (docs/security.md), with the words of the
refusal expected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

METADATA = "100.100.100.200"
"""Alibaba Cloud's instance metadata service."""
PULL_SECRET = "registry-pull"
"""The registry's pull secret in a team's namespace (conftest's ``with_pull_secret``)."""

Attack = Callable[[dict[str, Any], dict[str, Any]], None]
"""Changes a pod (in place) given the other team's uid/gid, another job's name and the pull secret."""


def sc(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"].setdefault("securityContext", {})


def c0(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["containers"][0]


def _volume(source: dict[str, Any]) -> Attack:
    return lambda pod, o: pod["spec"]["volumes"].append({"name": "x", **source})


def _extra(kind: str, context: str) -> Attack:
    def attack(pod: dict[str, Any], o: dict[str, Any]) -> None:
        container = {"name": "peek", "image": c0(pod)["image"], "command": ["sh"]}
        container["securityContext"] = {"runAsUser": o["uid"]} if context == "uid" else {"privileged": True}
        pod["spec"].setdefault(kind, []).append(container)

    return attack


ATTACKS: list[tuple[str, Attack, str]] = [
    ("another team's uid", lambda p, o: sc(p).update(runAsUser=o["uid"]), "run as the team's uid"),
    ("another team's gid", lambda p, o: sc(p).update(runAsGroup=o["gid"]), "run as the team's uid"),
    ("no pod identity", lambda p, o: p["spec"].pop("securityContext"), "run as the team's uid"),
    (
        "a container as root",
        lambda p, o: c0(p).setdefault("securityContext", {}).update(runAsUser=0),
        "containers in",
    ),
    ("an init container as another uid", _extra("initContainers", "uid"), "containers in"),
    ("an ephemeral container as another uid", _extra("ephemeralContainers", "uid"), "containers in"),
    ("another team's fsGroup", lambda p, o: sc(p).update(fsGroup=o["gid"]), "may add only"),
    ("another team's supplemental group", lambda p, o: sc(p).update(supplementalGroups=[o["gid"]]), "may add only"),
    ("hostPath /", _volume({"hostPath": {"path": "/"}}), "volumes in"),
    ("hostPID", lambda p, o: p["spec"].update(hostPID=True), "host namespaces"),
    ("hostIPC", lambda p, o: p["spec"].update(hostIPC=True), "host namespaces"),
    (
        "hostNetwork",
        lambda p, o: p["spec"].update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"),
        "host namespaces",
    ),
    ("a privileged init container", _extra("initContainers", "privileged"), "privileged containers"),
    (
        "a privileged container with an added capability",
        lambda p, o: c0(p).update(securityContext={"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}),
        "privileged containers",
    ),
    ("an inline nfs volume of the NAS root", _volume({"nfs": {"server": "nas.example", "path": "/"}}), "volumes in"),
    (
        "an inline csi volume",
        _volume({"csi": {"driver": "nasplugin.csi.alibabacloud.com", "volumeAttributes": {"path": "/"}}}),
        "volumes in",
    ),
    (
        "an inline iscsi volume",
        _volume({"iscsi": {"targetPortal": "10.0.0.9", "iqn": "iqn.x", "lun": 0}}),
        "volumes in",
    ),
    ("a claim not the team's", _volume({"persistentVolumeClaim": {"claimName": "imported"}}), "volumes in"),
    (
        "another job's checkpoint key",
        lambda p, o: _volume({"secret": {"secretName": f"{o['job']}-checkpoint-key"}})(p, o),
        "volumes in",
    ),
    ("the pull secret as a volume", _volume({"secret": {"secretName": PULL_SECRET}}), "volumes in"),
    (
        "a Secret through a projected volume",
        _volume({"projected": {"sources": [{"secret": {"name": PULL_SECRET}}]}}),
        "volumes in",
    ),
    (
        "a token for another audience",
        _volume({"projected": {"sources": [{"serviceAccountToken": {"audience": "sts.aliyuncs.com", "path": "t"}}]}}),
        "volumes in",
    ),
    (
        "the pull secret in the environment",
        lambda p, o: c0(p)["env"].append(
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": PULL_SECRET, "key": "k"}}}
        ),
        "environment from Secrets",
    ),
    (
        "another job's key through envFrom",
        lambda p, o: c0(p).update(envFrom=[{"secretRef": {"name": f"{o['job']}-checkpoint-key"}}]),
        "environment from Secrets",
    ),
    ("a system priority class", lambda p, o: p["spec"].update(priorityClassName="system-node-critical"), "priority"),
    (
        "another job's name label",
        lambda p, o: p["metadata"]["labels"].update({"app.kubernetes.io/name": o["job"]}),
        "own job",
    ),
    (
        "a second job label",
        lambda p, o: p["metadata"]["labels"].update({"jobset.sigs.k8s.io/jobset-name": o["job"]}),
        "own job",
    ),
    (
        "a ServiceAccount token",
        lambda p, o: p["spec"].update(automountServiceAccountToken=True),
        "no ServiceAccount token",
    ),
    (
        "a ServiceAccount token volume",
        _volume({"projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}),
        "no ServiceAccount token",
    ),
    (
        "a liveness probe to the metadata service",
        lambda p, o: c0(p).update(
            livenessProbe={"httpGet": {"host": METADATA, "path": "/latest/meta-data/", "port": 80}}
        ),
        "probes and lifecycle hooks",
    ),
    (
        "a readiness probe to another host",
        lambda p, o: c0(p).update(readinessProbe={"tcpSocket": {"host": "10.0.0.9", "port": 2049}}),
        "probes and lifecycle hooks",
    ),
    (
        "a startup probe to another host",
        lambda p, o: c0(p).update(startupProbe={"httpGet": {"host": METADATA, "port": 80}}),
        "probes and lifecycle hooks",
    ),
    (
        "a preStop hook to the metadata service",
        lambda p, o: c0(p).update(lifecycle={"preStop": {"httpGet": {"host": METADATA, "port": 80}}}),
        "probes and lifecycle hooks",
    ),
    (
        "a postStart hook of an init container to another host",
        lambda p, o: (
            p["spec"]
            .setdefault("initContainers", [])
            .append(
                {
                    "name": "side",
                    "image": c0(p)["image"],
                    "restartPolicy": "Always",
                    "lifecycle": {"postStart": {"tcpSocket": {"host": METADATA, "port": 80}}},
                }
            )
        ),
        "probes and lifecycle hooks",
    ),
    (
        "a pod bound to a node past the scheduler",
        lambda p, o: p["spec"].update(nodeName="cn-wulanchabu.10.0.0.7"),
        "placed by the scheduler",
    ),
    (
        "another scheduler",
        lambda p, o: p["spec"].update(schedulerName="my-scheduler"),
        "placed by the scheduler",
    ),
    (
        "another job's launcher account",
        lambda p, o: p["spec"].update(serviceAccountName=f"{o['job']}-launcher"),
        "service account",
    ),
]
