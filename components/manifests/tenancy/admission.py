"""The admission boundary of a team's namespace: a ValidatingAdmissionPolicy and its binding
(``admissionregistration.k8s.io/v1``, GA in Kubernetes 1.30) that the API server checks on every
pod created or updated there, whoever creates it.

Pod Security ``baseline`` leaves open what crosses teams here: another team's uid (NFS tells teams
apart by uid), inline ``nfs``/``csi`` volumes, any Secret of the namespace, any PriorityClass, and
the job label a NetworkPolicy selects by. The policy pins those to the team, refuses the eRDMA
fabric's devices to teams without ``rdma``, and repeats ``baseline``'s controls, so that the
boundary does not rest on the namespace's label alone.

Members cannot create pods (``JOB_USER_RULES``): theirs come from the v1 operator, which labels
every pod ``training.kubeflow.org/job-name`` over the template's labels (kubeflow/trainer v1.9.4
``pkg/controller.v1/common/pod.go`` ``createNewPod``, ``job_controller.go`` ``GenLabels``), or
from JobSet under Trainer v2, which labels them ``jobset.sigs.k8s.io/jobset-name`` with the
TrainJob's name the same way (kubernetes-sigs/jobset v0.12.0 ``pkg/controllers/jobset_controller.go``
``labelAndAnnotateObject``; kubeflow/trainer v2.3.0 ``plugins/jobset/jobset.go`` names the JobSet
after the TrainJob). The policy reads a pod's job from those labels, never from labels the
template sets.

The expressions are built from :mod:`.pod_rules`, in the part of CEL that Kubernetes and
cel-python share.
"""

from __future__ import annotations

from ...config import PROJECT
from ..base import JOB_LABEL, Manifest
from ..fabrics import FABRICS
from ..jobs.env import CHECKPOINT_KEY_SUFFIX, JOBSET_NAME_LABEL
from ..jobs.names import MPI_LAUNCHER_ACCOUNT
from .admission_policy import admission_policy
from .boundary import TeamBoundary
from .job_guard import job_guard
from .pod_rules import (
    APPARMOR_ANNOTATION,
    BASELINE_CAPABILITIES,
    SAFE_SYSCTLS,
    context_controls,
    every_container,
    literal,
    literal_list,
    no_probe_hosts,
    none_of,
    unless_unset,
    when,
)

V1_JOB_LABEL = "training.kubeflow.org/job-name"
V2_JOB_LABEL = JOBSET_NAME_LABEL
V1_MPI_CONFIG = "-config"
"""The v1 MPIJob's ConfigMap, ``<job>-config`` (v1.9.4 ``pkg/controller.v1/mpi/mpijob.go``)."""
V1_REPLICA_LABEL = "training.kubeflow.org/replica-type"
V1_MPI_LAUNCHER_REPLICA = "launcher"
"""The label and value the v1 operator gives an MPIJob's Launcher pod (v1.9.4
``pkg/controller.v1/mpi/mpijob.go`` ``defaultLauncherLabels``), which it creates with the MPIJob as
its controller (``mpijob_controller.go`` ``newLauncher``: ``NewControllerRef``)."""
V2_MPI_SECRET = "-mpi-ssh-auth"
V2_MPI_HOSTFILE = "-mpi-hostfile"
"""Trainer v2's MPI plugin mounts ``<job>-mpi-ssh-auth`` and ``<job>-mpi-hostfile`` (v2.3.0
``pkg/constants/constants.go``, ``plugins/mpi/mpi.go``)."""
ROOT_CA = "kube-root-ca.crt"
"""The ConfigMap the ServiceAccount admission plugin projects beside a pod's token."""


def _changed(field: str) -> str:
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    return f"has({new}) != has({old}) || (has({new}) && {new} != {old})"


_RELABELLED = " || ".join(
    [
        'request.operation != "UPDATE"',
        'request.subResource == "ephemeralcontainers"',
        _changed("labels"),
        _changed("annotations"),
    ]
)
"""Which requests the pod policy evaluates: every CREATE; of the UPDATEs, those adding ephemeral
containers or changing labels (a job's NetworkPolicy group) or annotations (AppArmor). The rest
of a pod's spec cannot change after creation in what the policy checks, and its controllers
update pods to remove their finalizers (the Job controller's ``batch.kubernetes.io/job-tracking``):
a pod admitted under an earlier policy that the current one would refuse must still be able to
go (Kubernetes docs, "Validating Admission Policy", ``matchConditions``: a policy is skipped for a
request where any of them is false)."""


def _controlled_by(kind: str) -> str:
    """Whether the pod's controller (the one owner reference a controller sets, and members cannot:
    they create no pods) is of ``kind``, a CEL expression."""
    refs = "object.metadata.ownerReferences"
    return f"has({refs}) && {refs}.exists(r, has(r.controller) && r.controller && r.kind == {kind})"


def policy_name(team: str) -> str:
    return f"{PROJECT}-team-{team}"


def _secret_ok(name: str, boundary: TeamBoundary) -> str:
    """Whether the Secret ``name`` (a CEL expression) is the pod's job's own."""
    pairs = literal_list(f"{job}/{secret}" for job, secret in boundary.job_secrets)
    return (
        f'(variables.jobName != "" && ({name} == variables.jobName + "{CHECKPOINT_KEY_SUFFIX}"'
        f' || variables.jobName + "/" + {name} in {pairs}'
        f' || (variables.v2Job && {name} == variables.jobName + "{V2_MPI_SECRET}")))'
    )


def team_admission(boundary: TeamBoundary) -> list[Manifest]:
    """The team's ValidatingAdmissionPolicy and the binding that applies it, refusing, in the
    team's namespace, any pod that is not within the team's boundary (see the module's docstring).

    Args:
        boundary: what the team's pods may use (:func:`team_boundary`).

    Returns:
        The policy and its binding, and the policy keeping the stack's jobs' names from members
        (:mod:`.job_guard`) with its binding; all cluster-scoped.
    """
    team = boundary.team
    uid, gid = team.uid, team.group_id
    sc = "object.spec.securityContext"
    labels = "object.metadata.labels"
    c0 = "object.spec.containers[0]"
    variables = [
        ("v1Job", f"has({labels}) && {literal(V1_JOB_LABEL)} in {labels}"),
        ("v2Job", f"has({labels}) && {literal(V2_JOB_LABEL)} in {labels}"),
        (
            "jobName",
            f"variables.v1Job ? {labels}[{literal(V1_JOB_LABEL)}] : (variables.v2Job ? {labels}[{literal(V2_JOB_LABEL)}] : {literal('')})",
        ),
        # The Launcher of one of the stack's v1 MPIJobs, which alone gets a ServiceAccount token:
        # its own account's, to exec into its Workers (names.MPI_LAUNCHER_ACCOUNT).
        (
            "mpiLauncher",
            f"variables.v1Job && variables.jobName in {literal_list(boundary.mpi_launchers)}"
            f" && {literal(V1_REPLICA_LABEL)} in {labels}"
            f" && {labels}[{literal(V1_REPLICA_LABEL)}] == {literal(V1_MPI_LAUNCHER_REPLICA)}"
            f" && {_controlled_by(literal('MPIJob'))}",
        ),
        # The Job that hands the team its directories (tenancy.directory_owner_job): root with CHOWN
        # alone, and no job's pod, which only the platform creates.
        (
            "owner",
            " && ".join(
                [
                    'variables.jobName == ""',
                    "size(object.spec.containers) == 1",
                    none_of("initContainers"),
                    none_of("ephemeralContainers"),
                    f"has({c0}.securityContext) && has({c0}.securityContext.runAsUser) && {c0}.securityContext.runAsUser == 0",
                    f"has({c0}.securityContext.capabilities) && has({c0}.securityContext.capabilities.add)",
                    f'{c0}.securityContext.capabilities.add == ["CHOWN"]',
                    f'has({c0}.securityContext.capabilities.drop) && {c0}.securityContext.capabilities.drop == ["ALL"]',
                    f"has({c0}.securityContext.allowPrivilegeEscalation) && !{c0}.securityContext.allowPrivilegeEscalation",
                ]
            ),
        ),
    ]
    ctx = "c.securityContext"
    secret_ok = _secret_ok
    volume_ok = " || ".join(
        [
            "has(v.emptyDir)",
            when(
                "has(v.persistentVolumeClaim)", f"v.persistentVolumeClaim.claimName in {literal_list(boundary.claims)}"
            ),
            when("has(v.secret) && has(v.secret.secretName)", secret_ok("v.secret.secretName", boundary)),
            when(
                'has(v.configMap) && has(v.configMap.name) && variables.jobName != ""',
                f'(variables.v1Job && v.configMap.name == variables.jobName + "{V1_MPI_CONFIG}")'
                f' || (variables.v2Job && v.configMap.name == variables.jobName + "{V2_MPI_HOSTFILE}")',
            ),
            # The token the ServiceAccount admission plugin projects into a pod that does not opt
            # out: refused below but on an MPI Launcher.
            when(
                "has(v.projected) && has(v.projected.sources)",
                "v.projected.sources.all(s, "
                + " || ".join(
                    [
                        when("has(s.serviceAccountToken)", "!has(s.serviceAccountToken.audience)"),
                        "has(s.downwardAPI)",
                        when("has(s.configMap) && has(s.configMap.name)", f"s.configMap.name == {literal(ROOT_CA)}"),
                    ]
                )
                + ")",
            ),
        ]
    )
    env_ok = (
        unless_unset(
            "c",
            "env",
            "c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef) || "
            + when("has(e.valueFrom.secretKeyRef.name)", secret_ok("e.valueFrom.secretKeyRef.name", boundary))
            + ")",
        )
        + " && "
        + unless_unset(
            "c",
            "envFrom",
            "c.envFrom.all(s, !has(s.secretRef) || "
            + when("has(s.secretRef.name)", secret_ok("s.secretRef.name", boundary))
            + ")",
        )
    )
    claims = ", ".join(boundary.claims)
    kinds = "{" + ", ".join(f"{literal(job)}: {literal(kind)}" for job, kind in boundary.job_kinds) + "}"
    validations = [
        (
            f"variables.owner || (has({sc}) && has({sc}.runAsUser) && {sc}.runAsUser == {uid}"
            f" && has({sc}.runAsGroup) && {sc}.runAsGroup == {gid})",
            f"pods in {team.name} run as the team's uid {uid} and gid {gid}: set securityContext.runAsUser and runAsGroup",
        ),
        (
            "variables.owner || "
            + every_container(
                unless_unset(
                    "c",
                    "securityContext",
                    f"{unless_unset(ctx, 'runAsUser', f'{ctx}.runAsUser == {uid}')}"
                    f" && {unless_unset(ctx, 'runAsGroup', f'{ctx}.runAsGroup == {gid}')}",
                )
            ),
            f"containers in {team.name} run as the team's uid {uid} and gid {gid}, or leave runAsUser and runAsGroup to the pod",
        ),
        (
            unless_unset(
                "object.spec",
                "securityContext",
                f"{unless_unset(sc, 'fsGroup', f'{sc}.fsGroup == {gid}')} && "
                f"{unless_unset(sc, 'supplementalGroups', f'{sc}.supplementalGroups.all(g, g == {gid})')}",
            ),
            f"pods in {team.name} may add only the team's gid {gid} (fsGroup, supplementalGroups)",
        ),
        (
            " && ".join(
                f"!(has(object.spec.{ns}) && object.spec.{ns})" for ns in ("hostNetwork", "hostPID", "hostIPC")
            ),
            "host namespaces are refused (hostNetwork, hostPID, hostIPC)",
        ),
        (
            unless_unset("object.spec", "volumes", f"object.spec.volumes.all(v, {volume_ok})"),
            f"volumes in {team.name}: the team's claims ({claims}), emptyDir, and the job's own Secret "
            "(<job>-checkpoint-key); no hostPath, inline nfs/csi/iscsi or other Secret",
        ),
        (
            every_container(env_ok),
            "environment from Secrets: only the job's own (<job>-checkpoint-key, or one the stack gives the job)",
        ),
        (
            f"!has(object.spec.serviceAccountName) || object.spec.serviceAccountName in "
            f"{literal_list([boundary.service_account, 'default'])} || (variables.mpiLauncher && "
            f'object.spec.serviceAccountName == variables.jobName + "{MPI_LAUNCHER_ACCOUNT}")',
            f"service account: {boundary.service_account} (or default)",
        ),
        (
            "variables.mpiLauncher || (!(has(object.spec.automountServiceAccountToken) && "
            "object.spec.automountServiceAccountToken) && "
            + unless_unset(
                "object.spec",
                "volumes",
                "object.spec.volumes.all(v, !has(v.projected) || !has(v.projected.sources)"
                " || v.projected.sources.all(s, !has(s.serviceAccountToken)))",
            )
            + ")",
            "no ServiceAccount token (automountServiceAccountToken, a serviceAccountToken volume) "
            "but on the stack's MPI Launchers",
        ),
        (
            f"!has(object.spec.priorityClassName) || object.spec.priorityClassName in {literal_list(boundary.priority_classes)}",
            f"priority classes in {team.name}: {', '.join(boundary.priority_classes) or 'none'}",
        ),
        (
            f"!(variables.jobName in {kinds}) || {_controlled_by(f'{kinds}[variables.jobName]')}",
            f"a pod of one of the stack's jobs in {team.name} is made by that job's kind of controller",
        ),
        (
            '!(variables.v1Job && variables.v2Job) && (variables.jobName == "" || !has(object.metadata.labels)'
            f" || !({literal(JOB_LABEL)} in {labels}) || {labels}[{literal(JOB_LABEL)}] == variables.jobName)",
            f"a job's pod carries its own job's name in {JOB_LABEL}, and belongs to one job",
        ),
        (
            every_container(
                unless_unset("c", "securityContext", f"{unless_unset(ctx, 'privileged', f'!{ctx}.privileged')}")
            ),
            "privileged containers are refused",
        ),
        (
            every_container(
                unless_unset(
                    "c",
                    "securityContext",
                    unless_unset(
                        ctx,
                        "capabilities",
                        unless_unset(
                            f"{ctx}.capabilities",
                            "add",
                            f"{ctx}.capabilities.add.all(x, x in {literal_list(BASELINE_CAPABILITIES)})",
                        ),
                    ),
                )
            ),
            "capabilities beyond Pod Security baseline's are refused",
        ),
        (
            every_container(
                unless_unset(
                    "c",
                    "ports",
                    "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)",
                )
            ),
            "host ports are refused",
        ),
        (
            unless_unset(
                "object.spec",
                "securityContext",
                context_controls(sc)
                + " && "
                + unless_unset(sc, "sysctls", f"{sc}.sysctls.all(s, s.name in {literal_list(SAFE_SYSCTLS)})"),
            )
            + " && "
            + every_container(
                unless_unset(
                    "c",
                    "securityContext",
                    context_controls(ctx) + " && " + unless_unset(ctx, "procMount", f'{ctx}.procMount == "Default"'),
                )
            )
            + " && "
            + unless_unset(
                "object.metadata",
                "annotations",
                f"object.metadata.annotations.all(k, !k.startsWith({literal(APPARMOR_ANNOTATION)})"
                ' || object.metadata.annotations[k] == "runtime/default" || object.metadata.annotations[k].startsWith("localhost/"))',
            ),
            "Pod Security baseline: seccomp, AppArmor, SELinux, sysctls, procMount and hostProcess as baseline allows",
        ),
    ]
    validations.append(
        (
            'request.operation != "CREATE" || ((!has(object.spec.nodeName) || object.spec.nodeName == "")'
            f" && (!has(object.spec.schedulerName) || object.spec.schedulerName in {literal_list(boundary.schedulers)}))",
            f"pods in {team.name} are placed by the scheduler ({', '.join(boundary.schedulers)}): no nodeName, "
            "no other schedulerName",
        )
    )
    validations.append(
        (
            every_container(no_probe_hosts("c")),
            "probes and lifecycle hooks may not name a host (httpGet.host, tcpSocket.host): the kubelet "
            "would reach it from the node's network",
        )
    )
    if boundary.fabric is None:
        devices = [fabric.resource for fabric in FABRICS.values()]
        validations.append(
            (
                every_container(
                    unless_unset(
                        "c",
                        "resources",
                        " && ".join(
                            unless_unset("c.resources", kind, f"!({literal(device)} in c.resources.{kind})")
                            for kind in ("limits", "requests")
                            for device in devices
                        ),
                    )
                ),
                f"the eRDMA devices ({', '.join(devices)}) are for teams with rdma: true",
            )
        )
    name = policy_name(team.name)
    pod_rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["pods", "pods/ephemeralcontainers"],
        }
    ]
    policy = admission_policy(
        name, team.name, pod_rules, variables, validations, [("pod-created-or-relabelled", _RELABELLED)]
    )
    members = [(m.kind, m.name) for m in team.members]
    guard = job_guard(team.name, members, [job for job, _ in boundary.job_kinds], f"{name}-jobs")
    return [*policy, *guard]
