"""The PromQL the platform's alerts (:mod:`.alerts`) are made of, one function per question.

Metric names and labels come from ``trainer/telemetry/metric_names.py`` and :mod:`.kube_metrics`; every
selector is limited to the namespaces the monitoring watches.
"""

from __future__ import annotations

import re

from trainer.telemetry import metric_names as trainer

from ..jobs.names import KINDS, TRAINER_NODE
from . import kube_metrics as kube
from .scraping import JOB_LABEL

V1_CONTAINERS = tuple(kind.container for kind in KINDS.values())
"""The container the v1 operator configures in each kind's pods, which runs the job's code
(kubeflow/trainer v1.9.4 ``pkg/apis/kubeflow.org/v1/*_types.go`` ``*DefaultContainerName``)."""
V1_CONTAINER_MATCH = f'container=~"{"|".join(V1_CONTAINERS)}"'
TRAINING_CONTAINERS = f'container=~"{"|".join((*V1_CONTAINERS, TRAINER_NODE))}"'
V1_OWNER_KINDS = f'owner_kind=~"{"|".join(kind.kind for kind in KINDS.values())}"'
FAILED_PHASE = 'phase="Failed"'
PENDING_PHASE = 'phase="Pending"'
RUNNING_PHASE = 'phase="Running"'
CONDITION_TRUE = 'condition="true"'
STOPPED_WINDOW = "15m"
"""How long a TrainJob that stopped early keeps its alert."""
EXPORTER_LOOKBACK = "1d"
"""How far back a silent pod's last report is looked for: a pod whose exporter stopped answering
while it was in its step loop stays under watch this long."""
V1_GROUP = 'customresource_group="kubeflow.org"'
TRAINJOB_KIND = 'customresource_kind="TrainJob"'


KUBE_STATE_METRICS_SERIES = re.compile(r"(?<![\w:])(kube_\w+)(?![\w:])(\{)?")
"""A selector of a kube-state-metrics series: every one it serves is named ``kube_*``
(kubernetes/kube-state-metrics v2.20.0 ``docs/metrics/``, and ``kube_customresource`` for custom resources),
a prefix no other exporter the alerts read uses."""
QUOTED = re.compile(r'("(?:[^"\\]|\\.)*")')


def kube_state_metrics_only(expr: str, job: str) -> str:
    """``expr`` with every selector of a kube-state-metrics series limited to ``job="<job>"``, the job label
    Prometheus gives that exporter's series: a team's pod may serve series of the same names, which the
    platform's PodMonitor labels with its own ``job`` (:mod:`.cost_rules`)."""

    def told(found: re.Match[str]) -> str:
        return f'{found[1]}{{job="{job}"' + ("," if found[2] else "}")

    # Quoted strings (label values, label_replace's arguments) are left as they are.
    parts = QUOTED.split(expr)
    return "".join(part if i % 2 else KUBE_STATE_METRICS_SERIES.sub(told, part) for i, part in enumerate(parts))


def in_namespaces(namespaces: tuple[str, ...], label: str = "namespace") -> str:
    """A matcher of ``label`` for any of ``namespaces``."""
    if len(namespaces) == 1:
        return f'{label}="{namespaces[0]}"'
    return f'{label}=~"{"|".join(namespaces)}"'


def select(metric: str, namespaces: tuple[str, ...], *matchers: str) -> str:
    """``metric`` in any of ``namespaces``, with more label ``matchers`` such as ``'condition="true"'``."""
    joined = ",".join([in_namespaces(namespaces), *matchers])
    return f"{metric}{{{joined}}}"


def job_condition(namespaces: tuple[str, ...], condition: str, *matchers: str) -> str:
    """Training jobs (by ``namespace`` and ``JOB_LABEL``) whose ``condition`` is true now, from
    :data:`kube_metrics.JOB_CONDITION`."""
    series = select(kube.JOB_CONDITION, namespaces, f'condition=~"{condition}"', *matchers)
    return f"max by (namespace, {JOB_LABEL}) ({series} == 1)"


def newly_failed(namespaces: tuple[str, ...], window: str, *matchers: str) -> str:
    """Jobs whose ``Failed`` condition turned true within ``window``: held long enough to be
    delivered, not for as long as the failed job is kept. The v1 operator sets it on every path
    that fails a job, a backoff limit and a deadline included, which its failure counter does not
    count (v1.9.4 ``pkg/controller.v1/common/job.go`` ``ReconcileJobs``)."""
    series = select(kube.JOB_CONDITION, namespaces, 'condition="Failed"', *matchers)
    now = f"max by (namespace, {JOB_LABEL}) ({series} == 1)"
    return f"{now} unless on (namespace, {JOB_LABEL}) max by (namespace, {JOB_LABEL}) ({series} offset {window} == 1)"


def trainjob_failed(namespace: tuple[str, ...], offset: str = "") -> str:
    """TrainJobs (by ``JOB_LABEL``) with a failed node Job, as of ``offset`` ago."""
    failed = (
        select(kube.JOB_FAILED, namespace, CONDITION_TRUE) + f"{offset} * on (namespace, job_name) group_left "
        f'(owner_name) {kube.JOB_OWNER}{{owner_kind="JobSet"}}{offset}'
    )
    return f'max by (namespace, {JOB_LABEL}) (label_replace({failed}, "{JOB_LABEL}", "$1", "owner_name", "(.+)")) > 0'


def trainjob_stopped(namespace: tuple[str, ...]) -> str:
    """TrainJobs whose node Jobs were there within ``STOPPED_WINDOW`` and are gone now, none of
    them having completed or failed: what Trainer v2.3.0 leaves when ``activeDeadlineSeconds``
    passes (``pkg/controller/trainjob_controller.go`` ``reconcileDeadline`` marks the TrainJob
    failed and deletes its JobSet), which no Job condition shows."""
    owners = select(kube.JOB_OWNER, namespace, 'owner_kind="JobSet"')

    def by_trainjob(expr: str) -> str:
        return f"max by (namespace, owner_name) ({expr})"

    def ended(condition: str) -> str:
        return by_trainjob(
            f"(last_over_time({select(condition, namespace, CONDITION_TRUE)}[{STOPPED_WINDOW}]) == 1) * on "
            f"(namespace, job_name) group_left (owner_name) last_over_time({owners}[{STOPPED_WINDOW}])"
        )

    # A JobSet restart deletes and recreates its Jobs in about a minute: ``for`` outlasts that gap.
    gone = (
        f"{by_trainjob(f'last_over_time({owners}[{STOPPED_WINDOW}])')} unless on (namespace, owner_name) "
        f"{by_trainjob(owners)} unless on (namespace, owner_name) {ended(kube.JOB_COMPLETE)} "
        f"unless on (namespace, owner_name) {ended(kube.JOB_FAILED)}"
    )
    return f'max by (namespace, {JOB_LABEL}) (label_replace({gone}, "{JOB_LABEL}", "$1", "owner_name", "(.+)"))'


def restarts(namespace: tuple[str, ...], threshold: int) -> str:
    """Training pods or TrainJobs restarted ``threshold`` times or more in an hour, counting each
    way a backend restarts them:

    - v1 ``OnFailure``/``Always``: the kubelet restarts the container in place
      (``kube_pod_container_status_restarts_total``);
    - v1 ``ExitCode``/``Never``: the operator deletes the failed pod and creates it again under the
      same name (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/pod.go``), a new uid each time,
      so the incarnations of a name seen in the hour, less one, are its restarts;
    - v2: the JobSet deletes and recreates every node Job under the same name
      (``failurePolicy.maxRestarts``; its pods run with ``restartPolicy: Never`` and
      ``backoffLimit: 0``), which changes ``kube_job_created``.

    Every kind's container counts (:data:`TRAINING_CONTAINERS`). The v1 operator's
    ``training_operator_jobs_restarted_total`` counts these too, but only per namespace.
    """
    in_place = f"sum by (namespace, pod) (increase({select(kube.POD_RESTARTS, namespace, TRAINING_CONTAINERS)}[1h]))"
    incarnations = (
        f"count by (namespace, pod) (last_over_time({select(kube.POD_CREATED, namespace)}[1h]) and on (namespace, pod) "
        f"{select(kube.POD_CONTAINER_INFO, namespace, V1_CONTAINER_MATCH)})"
    )
    recreated_jobs = (
        f"changes({select(kube.JOB_CREATED, namespace)}[1h]) * on (namespace, job_name) group_left (owner_name) "
        f'{kube.JOB_OWNER}{{owner_kind="JobSet"}}'
    )
    trainjobs = (
        f'max by (namespace, {JOB_LABEL}) (label_replace({recreated_jobs}, "{JOB_LABEL}", "$1", "owner_name", "(.+)"))'
    )
    return f"({in_place} + on (namespace, pod) ({incarnations} - 1)) >= {threshold} or {trainjobs} >= {threshold}"


def silent_in_step_loop(namespaces: tuple[str, ...], window: str) -> str:
    """Running pods whose trainer target has not answered a scrape for ``window`` although the last
    thing it reported was being in its step loop: a process wedged holding the GIL stops serving
    metrics as well as stepping, so its step counter goes stale rather than flat. Labels
    ``namespace``, ``JOB_LABEL``, ``pod``."""
    targets = select(kube.UP, namespaces, f'{JOB_LABEL}!=""')
    down = f"max by (namespace, {JOB_LABEL}, pod) (max_over_time({targets}[{window}]) == 0)"
    looping = f"last_over_time({select(trainer.TRAINING_LOOP.name, namespaces)}[{EXPORTER_LOOKBACK}]) == 1"
    running = f"{select(kube.POD_PHASE, namespaces, RUNNING_PHASE)} == 1"
    return f"{down} and on (namespace, pod) ({looping}) and on (namespace, pod) ({running})"


def v1_jobs_without_pods(namespaces: tuple[str, ...]) -> str:
    """v1 jobs created but neither running nor ended that own no pod: what a namespace's
    ResourceQuota leaves, since the API server refuses a pod over it, so none is ever Pending (Kubernetes
    "Resource Quotas": a create request that would exceed the quota fails with 403 Forbidden), and what
    Volcano leaves while the job's PodGroup waits in its queue, since the operator creates no pod while
    the PodGroup is Pending (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/job.go`` ``ReconcileJobs``,
    ``pkg/controller.v1/control/podgroup_control.go`` ``DelayPodCreationDueToPodGroup``)."""
    created = job_condition(namespaces, "Created", V1_GROUP)
    moved_on = job_condition(namespaces, "Running|Restarting|Succeeded|Failed|Suspended", V1_GROUP)
    owners = f"max by (namespace, owner_name) ({select(kube.POD_OWNER, namespaces, V1_OWNER_KINDS)})"
    pods = f'label_replace({owners}, "{JOB_LABEL}", "$1", "owner_name", "(.+)")'
    return f"{created} unless on (namespace, {JOB_LABEL}) {moved_on} unless on (namespace, {JOB_LABEL}) {pods}"


def trainjobs_waiting_for_admission(namespaces: tuple[str, ...]) -> str:
    """TrainJobs in a Kueue queue that are suspended and have not ended: Kueue keeps a queued job
    suspended until it admits its workload (kubernetes-sigs/kueue v0.19.2
    ``pkg/controller/jobframework/reconciler.go``), and Trainer v2.3.0 shows that as the TrainJob's
    ``Suspended`` condition (``pkg/apis/trainer/v1alpha1/trainjob_types.go``). Labels ``namespace``,
    ``JOB_LABEL``, ``queue``."""
    series = select(kube.JOB_CONDITION, namespaces, TRAINJOB_KIND, 'condition="Suspended"', 'queue!=""')
    suspended = f"max by (namespace, {JOB_LABEL}, queue) ({series} == 1)"
    ended = job_condition(namespaces, "Complete|Failed", TRAINJOB_KIND)
    return f"{suspended} unless on (namespace, {JOB_LABEL}) {ended}"
