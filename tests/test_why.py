"""Why a job waits: :func:`components.jobs.why.why` for each cause, from jobs the platform's
builders make and from what the controllers write about them (``tests/fixtures/waiting.py``,
each builder naming the upstream file it follows); the stand-ins checked against the format
strings quoted from those files; ``ack-jobs why`` and ``get`` against the stand-in API server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fixtures import waiting as w
from loopback_api import KUEUE, NS, PODS, V1, V2, jobs
from test_job_submit import gpu_context

from components.config import TrainingJobSpec
from components.jobs.why import Observed, why
from components.jobs.why import messages as m
from components.jobs.why import observed as c
from components.jobs.why.resources import pod_requests, quantity
from components.manifests import pytorch_job, train_job

IMAGE = "registry.example.com/ml/trainer:v1.4.0"
POOL = {"ack-training-platform/pool": "gpu"}
PLACEMENT = {
    "nodeSelector": POOL,
    "gpusPerNode": 8,
    "maxNodes": 4,
    "node": {"millicpu": 94000, "memory": 700 * 2**30, "exact": True, "source": "gpuPool.nodeCapacity"},
}
GPUS8 = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}


def v1(name: str, nodes: int = 2) -> dict[str, Any]:
    job = pytorch_job(TrainingJobSpec(name=name, image=IMAGE, nodes=nodes), gpu_context("v1"))
    job["metadata"]["uid"] = f"uid-{name}"
    job["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]}
    return job


def v2(name: str, nodes: int = 2) -> dict[str, Any]:
    job = train_job(TrainingJobSpec(name=name, image=IMAGE, nodes=nodes, backend="v2"), gpu_context("v2"))
    job["metadata"]["uid"] = f"uid-{name}"
    job["status"] = {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended"}]}
    return job


def v1_pods(job: str, **kw: Any) -> list[dict[str, Any]]:
    label = "training.kubeflow.org/job-name"
    return [w.pod(f"{job}-{kind}-0", {label: job}, requests=GPUS8, **kw) for kind in ("master", "worker")]


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": POOL}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}


NODES = [node(f"gpu-node-{i}") for i in range(4)]


def seen(job: dict[str, Any], **kw: Any) -> Observed:
    return Observed(job=job, nodes=kw.pop("nodes", NODES[:3]), placement=PLACEMENT, **kw)


# --- each cause -----------------------------------------------------------------------------


def test_a_healthy_job_is_running() -> None:
    pods = v1_pods("bert", phase="Running", node="gpu-node-0")
    pods[1]["spec"]["nodeName"] = "gpu-node-1"
    found = why(seen(v1("bert"), pods=pods))
    assert found == c.Why(c.RUNNING, "It is running: 2/2 pods running on gpu-node-0, gpu-node-1.")


def test_pods_scheduled_but_not_up_are_starting() -> None:
    pods = v1_pods("bert", node="gpu-node-0", waiting=("ContainerCreating", ""))
    pods[0]["status"]["phase"] = "Running"
    found = why(seen(v1("bert"), pods=pods))
    assert found == c.Why(
        c.STARTING, "It is starting: 1/2 pods running; bert-master-0 is ContainerCreating on gpu-node-0."
    )


def test_an_image_that_cannot_be_pulled() -> None:
    # kubelet pkg/kubelet/images: the container waits with ErrImagePull, then ImagePullBackOff.
    pulled = 'Back-off pulling image "registry.example.com/ml/trainer:v1.4.0"'
    pods = v1_pods("bert", node="gpu-node-0", waiting=("ImagePullBackOff", pulled))
    found = why(seen(v1("bert"), pods=pods))
    assert found.cause == c.IMAGE_PULL
    assert found.sentence == f"Pod bert-master-0 cannot pull image {IMAGE} (ImagePullBackOff): {pulled}."


def test_a_namespace_quota_with_no_room_names_the_resource_and_its_users() -> None:
    others = v1_pods("gpt", phase="Running", node="gpu-node-0")
    used = {"requests.nvidia.com/gpu": "16", "requests.cpu": "16"}
    quota = w.resource_quota("gpu-quota", {"requests.nvidia.com/gpu": "16", "requests.cpu": "200"}, used)
    found = why(seen(v1("bert"), quotas=[quota], namespace_pods=others))
    assert found == c.Why(
        c.QUOTA,
        "Namespace quota gpu-quota has no room for requests.nvidia.com/gpu: 16 of 16 in use (by gpt 16), "
        "and the job needs 16 more.",
    )


def test_a_quota_with_room_is_not_the_cause() -> None:
    quota = w.resource_quota("gpu-quota", {"requests.nvidia.com/gpu": "32"}, {"requests.nvidia.com/gpu": "16"})
    assert why(seen(v1("bert"), quotas=[quota])).cause == c.STARTING


def _workload(job: dict[str, Any], conditions: list[dict[str, str]], uid: str) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{meta['name']}-3f2a1",
            "namespace": NS,
            "uid": uid,
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [{"kind": job["kind"], "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {"active": True, "queueName": "training", "podSets": [{"name": "node", "count": 2}]},
        "status": {"conditions": conditions},
    }


def _cond(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


LOCAL_QUEUE = {"metadata": {"name": "training", "namespace": NS}, "spec": {"clusterQueue": "platform"}}


def test_kueue_not_admitted_names_the_quota_the_position_and_what_it_preempts() -> None:
    job = v2("gpt-large", nodes=4)
    message = w.kueue_waiting("node", "nvidia.com/gpu", "gpu", "16", preempting=1)
    mine = _workload(job, [_cond("QuotaReserved", "False", "WaitingForQuota", message)], uid="wl-large")
    victim = _workload(
        v2("bert"),
        [_cond("Evicted", "True", "Preempted", w.kueue_preempted("wl-large", "uid-gpt-large"))],
        uid="wl-bert",
    )
    found = why(
        seen(
            job,
            workload=mine,
            workloads=[mine, victim],
            local_queue=LOCAL_QUEUE,
            position={
                "metadata": {"name": mine["metadata"]["name"]},
                "positionInLocalQueue": 1,
                "positionInClusterQueue": 2,
            },
        )
    )
    assert found == c.Why(
        c.KUEUE,
        "Kueue has not admitted it: ClusterQueue platform has no room for nvidia.com/gpu in flavor gpu "
        "(16 more needed); it is 2nd in LocalQueue training (3rd in ClusterQueue platform); to make room it is "
        "preempting 1 workload(s): TrainJob/bert.",
    )


def test_kueue_not_evaluated_yet_and_a_deactivated_workload() -> None:
    job = v2("gpt")
    assert why(seen(job, workload=_workload(job, [], uid="u"))).sentence == "Kueue has not evaluated it yet."
    off = _workload(job, [], uid="u")
    off["spec"]["active"] = False
    assert why(seen(job, workload=off)).cause == c.SUSPENDED


def test_a_kueue_queued_job_without_a_readable_workload_is_not_called_suspended_by_its_user() -> None:
    # kueue v0.19.2: a job with the queue-name label stays suspended until its Workload is admitted;
    # ack-jobs resume of such a job patches its Workload, so with none it cannot help.
    job = v2("gpt")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert why(seen(job)) == c.Why(
        c.KUEUE,
        "Kueue has not admitted it: it waits in LocalQueue training, and its Workload is not made yet or could "
        "not be read.",
    )
    del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert why(seen(job)).cause == c.SUSPENDED


def test_a_gang_volcano_cannot_place() -> None:
    origin = w.volcano_fit_error(4, {"Insufficient nvidia.com/gpu": 3, "node(s) had untolerated taint {spot: true}": 1})
    message = w.gang_message(4, 4, {"Schedulable": 2, "Unschedulable": 2}, "bert-worker-0", origin)
    found = why(seen(v1("bert", nodes=4), podgroup=w.podgroup("bert", 4, message), nodes=NODES))
    assert found == c.Why(
        c.GANG,
        "Volcano cannot start the gang: it needs 4 pods placed at once and only 2 fit on the pool's 4 nodes now; "
        "3 of 4 nodes lack nvidia.com/gpu, 1 have the taint spot=true it does not tolerate.",
    )


def test_a_gang_read_by_someone_who_cannot_list_nodes_and_a_job_wide_origin() -> None:
    # volcano v1.12.1 pkg/scheduler/api/job_info.go FitError: `". Origin reason is: " + ji.JobFitErrors` when
    # the job as a whole was refused, else `". Origin reason is %v: %v"` of the first task's fit errors.
    origin = w.volcano_fit_error(4, {"Insufficient nvidia.com/gpu": 4})
    message = w.gang_message(2, 2, {"Unschedulable": 2}, "bert-worker-0", origin)
    job_wide = message.replace("Origin reason is bert-worker-0: ", "Origin reason is: ")
    assert m.gang(job_wide).origin == m.gang(message).origin == origin.rstrip(".")
    found = why(seen(v1("bert"), podgroup=w.podgroup("bert", 2, job_wide), nodes=[]))
    assert found.sentence == (
        "Volcano cannot start the gang: it needs 2 pods placed at once and only 0 fit on the pool's nodes now; "
        "4 of 4 nodes lack nvidia.com/gpu."
    )


def test_a_pod_bigger_than_any_node_of_the_pool() -> None:
    job = v1("bert")
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "16"
        replica["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "16"
    found = why(seen(job, pods=v1_pods("bert")))
    assert found == c.Why(
        c.NO_FIT,
        "No node of the pool can ever hold one of its pods: a pod asks for 16 nvidia.com/gpu, a node has 8 "
        "nvidia.com/gpu.",
    )


def test_no_node_fits_says_which_filters_refused_how_many_nodes() -> None:
    reasons = {
        "Insufficient nvidia.com/gpu": 1,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
        "node(s) didn't match Pod's node affinity/selector": 2,
        "node(s) didn't match pod topology spread constraints": 1,
    }
    events = [w.event("Pod", "bert-master-0", "FailedScheduling", w.scheduler_fit_error(5, reasons))]
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events))
    assert found == c.Why(
        c.NO_FIT,
        "No node fits its pods: 1 of 5 nodes lack nvidia.com/gpu, 1 have the taint node.kubernetes.io/unreachable= it "
        "does not tolerate, 2 do not match its node selector, 1 do not satisfy its pod topology spread constraints.",
    )


def _short(events: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    fit = w.scheduler_fit_error(3, {"Insufficient nvidia.com/gpu": 3})
    return [w.event("Pod", "bert-master-0", "FailedScheduling", fit, minutes_ago=3), *events]


def test_the_pool_at_its_maximum_size_by_the_autoscaler_and_by_count() -> None:
    said = w.not_triggered({"max node group size reached": 1})
    events = _short([w.event("Pod", "bert-master-0", "NotTriggerScaleUp", said, kind_type="Normal")])
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=NODES))
    assert found == c.Why(
        c.POOL_MAX,
        "The pool is at its maximum size, 4 of at most 4 nodes (the autoscaler: max node group size reached), "
        "and 3 of 3 nodes lack nvidia.com/gpu.",
    )
    without_nodes = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=[]))
    assert without_nodes.cause == c.POOL_MAX
    counted = why(seen(v1("bert"), pods=v1_pods("bert"), events=_short(), nodes=NODES))
    assert counted.cause == c.POOL_MAX and counted.sentence.startswith(
        "The pool is at its maximum size, 4 of at most 4"
    )


def test_another_node_group_at_its_maximum_is_not_the_pool() -> None:
    # cluster-autoscaler-1.34.5 eventing_scale_up_processor.go ReasonsMessage: one count per reason over
    # every node group considered, skipped ones (skippedreasons.go MaxLimitReachedReason) included.
    said = w.not_triggered({"max node group size reached": 1, "in backoff after failed scale-up": 1})
    events = _short([w.event("Pod", "bert-master-0", "NotTriggerScaleUp", said, kind_type="Normal")])
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=NODES[:2]))
    assert found.cause == c.NO_SCALE_UP
    assert found.sentence.startswith("The autoscaler will not add a node for it: ")
    assert "in backoff after failed scale-up" in found.sentence


def _stock_out(group: str) -> dict[str, Any]:
    failure = w.scale_up_failed(
        1, group, "OperationDenied.NoStock", "The requested resource is sold out in the specified zone"
    )
    return w.event("ConfigMap", "cluster-autoscaler-status", "ScaleUpFailed", failure)


def test_a_spot_stock_out_stops_the_autoscaler() -> None:
    # clusterstate.go records ScaleUpFailed only for a group it is scaling up (IsNodeGroupScalingUp): the
    # pod's TriggeredScaleUp names that group first.
    grow = w.event("Pod", "bert-master-0", "TriggeredScaleUp", w.triggered("np-gpu", 3, 4, 4), minutes_ago=2)
    events = _short([grow, _stock_out("np-gpu")])
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events))
    assert found == c.Why(
        c.NO_SCALE_UP,
        "The autoscaler cannot add a node: ECS has no stock of the pool's instance types in its zones "
        "(OperationDenied.NoStock).",
    )


def test_another_pools_scale_up_failure_is_not_this_jobs_cause() -> None:
    # ScaleUpFailed lives on the autoscaler's status ConfigMap, for every node group of the cluster.
    grow = w.event("Pod", "bert-master-0", "TriggeredScaleUp", w.triggered("np-gpu", 3, 4, 4), minutes_ago=2)
    taint = w.scheduler_fit_error(3, {"node(s) had untolerated taint {a: b}": 3})
    tainted = [w.event("Pod", "bert-master-0", "FailedScheduling", taint), _stock_out("np-cpu")]
    assert why(seen(v1("bert"), pods=v1_pods("bert"), events=tainted)).cause == c.NO_FIT
    assert why(seen(v1("bert"), pods=v1_pods("bert"), events=_short([grow, _stock_out("np-cpu")]))).cause == (
        c.STARTING
    )
    # A job whose pods are not created yet has met neither the scheduler nor the autoscaler.
    assert why(seen(v1("bert"), events=[_stock_out("np-gpu")])).sentence == (
        "It is starting: its 2 pods are not created yet."
    )


def test_an_autoscaler_in_backoff_will_not_add_a_node() -> None:
    said = w.not_triggered({"in backoff after failed scale-up": 1, "node(s) had untolerated taint {a: b}": 2})
    events = _short([w.event("Pod", "bert-worker-0", "NotTriggerScaleUp", said, kind_type="Normal")])
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events))
    assert found == c.Why(
        c.NO_SCALE_UP,
        "The autoscaler will not add a node for it: in backoff after failed scale-up, "
        "node(s) had untolerated taint {a: b}.",
    )


def test_a_triggered_scale_up_is_starting() -> None:
    events = _short([w.event("Pod", "bert-master-0", "TriggeredScaleUp", w.triggered("np-gpu", 3, 4, 4))])
    found = why(seen(v1("bert"), pods=v1_pods("bert"), events=events, nodes=NODES[:2]))
    assert found == c.Why(c.STARTING, "It is waiting for new nodes: pod triggered scale-up: [{np-gpu 3->4 (max: 4)}].")


def test_a_finished_job() -> None:
    job = v1("bert")
    job["status"]["conditions"].append({"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"})
    assert why(seen(job)) == c.Why(c.FINISHED, "It has finished: succeeded.")


# --- the stand-ins against the upstream formats ---------------------------------------------


@pytest.mark.parametrize(
    ("built", "quoted"),
    [
        # kubernetes pkg/scheduler/framework/types.go: NoNodeAvailableMsg, then "%v %v" per reason.
        (w.scheduler_fit_error(2, {"Insufficient cpu": 2}, preemption=False), "0/%v nodes are available: %v %v."),
        # volcano v1.12.1 pkg/scheduler/api/unschedule_info.go: "0/%v" + " nodes are unavailable", f.err+": %v."
        (w.volcano_fit_error(2, {"Insufficient cpu": 2}), "0/%v nodes are unavailable: %v %v."),
        # cluster-autoscaler-1.34.5 eventing_scale_up_processor.go / clusterstate.go
        (w.not_triggered({"max node group size reached": 1}), "pod didn't trigger scale-up: %d %s"),
        (w.triggered("g", 1, 2, 3), "pod triggered scale-up: [{%v %v->%v (max: %v)}]"),
        (w.scale_up_failed(1, "g", "c", "e"), "Failed adding %v nodes to group %v due to %v; source errors: %v"),
        # kueue v0.19.2 flavorassigner.go, scheduler.go
        (
            w.kueue_waiting("ps", "r", "f", "1", preempting=2),
            "couldn't assign flavors to pod set %s: insufficient unused quota for %s in flavor %s, %s more needed. "
            "Pending the preemption of %d workload(s)",
        ),
    ],
)
def test_the_stand_in_messages_follow_the_upstream_format_strings(built: str, quoted: str) -> None:
    pattern = re.escape(quoted).replace("%v", ".+?").replace("%d", r"\d+").replace("%s", ".+?")
    assert re.fullmatch(pattern, built), built


def test_the_gang_message_reads_back() -> None:
    origin = w.volcano_fit_error(3, {"Insufficient nvidia.com/gpu": 3})
    text = w.gang_message(2, 2, {"Unschedulable": 2}, "bert-master-0", origin)
    assert text.startswith("2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable;")
    assert m.gang(text) == m.Gang(2, 0, "0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu")
    assert m.fit_reasons(origin) == m.FitReasons(3, {"Insufficient nvidia.com/gpu": 3})


# --- the commands ---------------------------------------------------------------------------


def test_why_reads_the_workload_its_queue_position_and_the_events_through_the_api(cluster) -> None:
    api, kubeconfig = cluster
    job = v2("gpt-large", nodes=4)
    api.serve(V2, "TrainJob", [job])
    message = w.kueue_waiting("node", "nvidia.com/gpu", "gpu", "16")
    mine = _workload(job, [_cond("QuotaReserved", "False", "WaitingForQuota", message)], uid="wl-large")
    api.serve(f"{KUEUE}/namespaces/{NS}/workloads", "Workload", [mine])
    api.serve(
        f"{KUEUE}/namespaces/{NS}/localqueues", "LocalQueue", [{**LOCAL_QUEUE, "apiVersion": "kueue.x-k8s.io/v1beta2"}]
    )
    visibility = f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NS}/localqueues/training/pendingworkloads"
    entry = {"metadata": {"name": mine["metadata"]["name"]}, "positionInLocalQueue": 0, "positionInClusterQueue": 0}
    api.routes[("GET", visibility)] = {"kind": "PendingWorkloadsSummary", "items": [entry]}
    code, lines = jobs(kubeconfig, "why", "gpt-large")
    assert code == 0
    assert lines == [
        "gpt-large: Kueue has not admitted it: ClusterQueue platform has no room for nvidia.com/gpu in flavor gpu "
        "(16 more needed); it is 1st in LocalQueue training (1st in ClusterQueue platform)."
    ]
    assert visibility in api.paths("GET")


def test_why_and_get_show_a_quota_and_a_fit_error_read_from_the_api(cluster) -> None:
    api, kubeconfig = cluster
    job = v1("bert")
    api.serve(V1, "PyTorchJob", [job])
    api.pods += v1_pods("bert")
    api.nodes += NODES[:3]
    fit = w.scheduler_fit_error(3, {"Insufficient nvidia.com/gpu": 3})
    api.serve(f"/api/v1/namespaces/{NS}/events", "Event", [w.event("Pod", "bert-master-0", "FailedScheduling", fit)])
    code, lines = jobs(kubeconfig, "why", "bert")
    assert (code, lines) == (0, ["bert: No node fits its pods: 3 of 3 nodes lack nvidia.com/gpu."])
    quota = w.resource_quota("gpu-quota", {"pods": "2"}, {"pods": "2"})
    api.serve(f"/api/v1/namespaces/{NS}/resourcequotas", "ResourceQuota", [quota])
    api.pods = [p for p in api.pods if p["metadata"]["name"] != "bert-worker-0"]
    code, lines = jobs(kubeconfig, "get", "bert")
    assert (
        "Why:       Namespace quota gpu-quota has no room for pods: 2 of 2 in use (by bert 1), and the job needs 1 more."
        in lines
    )
    assert ("GET", f"{PODS}") in [(mm, p) for mm, p, _, _ in api.requests]


def test_why_by_someone_refused_the_events_the_quotas_and_the_nodes(cluster) -> None:
    api, kubeconfig = cluster
    api.serve(V1, "PyTorchJob", [v1("bert")])
    api.pods += v1_pods("bert")
    forbidden = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403}
    for path in (
        f"/api/v1/namespaces/{NS}/events",
        "/api/v1/namespaces/kube-system/events",
        f"/api/v1/namespaces/{NS}/resourcequotas",
        "/api/v1/nodes",
    ):
        api.routes[("GET", path)] = lambda _, __: (403, forbidden)
    code, lines = jobs(kubeconfig, "why", "bert")
    # Nothing read says more than that the pods exist and none runs.
    assert (code, lines) == (0, ["bert: It is starting: 0/2 pods running."])


def test_the_pods_unschedulable_condition_says_it_without_events() -> None:
    # kubernetes pkg/scheduler/schedule_one.go handleSchedulingFailure: besides the FailedScheduling event,
    # the pod's PodScheduled condition is set False, reason Unschedulable, message the FitError text.
    pods = v1_pods("bert")
    fit = w.scheduler_fit_error(3, {"Insufficient nvidia.com/gpu": 3})
    for pod in pods:
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": fit}
        ]
    assert why(seen(v1("bert"), pods=pods)) == c.Why(
        c.NO_FIT, "No node fits its pods: 3 of 3 nodes lack nvidia.com/gpu."
    )


def test_why_of_a_job_that_does_not_exist(cluster, capsys) -> None:
    _, kubeconfig = cluster
    assert jobs(kubeconfig, "why", "nope") == (1, [])
    assert capsys.readouterr().err == f"ack-jobs why: no PyTorchJob or TrainJob named 'nope' in namespace {NS}\n"


def test_a_volcano_queue_without_room_keeps_the_podgroup_pending() -> None:
    # volcano v1.12.1 pkg/scheduler/plugins/proportion/proportion.go: RecordPodGroupEvent(..., "Unschedulable",
    # "queue resource quota insufficient") when the job's minimum resources exceed the queue's capability.
    group = w.podgroup("bert", 2, None, phase="Pending")
    said = w.event("PodGroup", "bert", "Unschedulable", "queue resource quota insufficient", kind_type="Normal")
    found = why(seen(v1("bert"), podgroup=group, events=[said]))
    assert found == c.Why(
        c.VOLCANO_QUEUE,
        "Volcano queue research has no room for its minimum resources (queue resource quota insufficient).",
    )
    # plugins/resourcequota/resourcequota.go: "resource quota insufficient, requested: %v, used: %v, limited: %v"
    # of three ResourceLists; only the prefix is read.
    quota = "resource quota insufficient, requested: map[...], used: map[...], limited: map[...]"
    refused = w.event("PodGroup", "bert", "Unschedulable", quota, kind_type="Normal")
    assert why(seen(v1("bert"), podgroup=group, events=[refused])).cause == c.QUOTA
    # The job shares the PodGroup's name; its own later events do not hide the PodGroup's.
    created = w.event("PyTorchJob", "bert", "SuccessfulCreatePod", "Created pod: bert-worker-0", minutes_ago=0)
    assert why(seen(v1("bert"), podgroup=group, events=[said, created])).cause == c.VOLCANO_QUEUE
    inqueue = w.podgroup("bert", 2, None, phase="Inqueue")
    assert why(seen(v1("bert"), podgroup=inqueue, events=[said])).cause == c.STARTING


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("0.5", 0.5),
        ("8", 8.0),
        ("64Gi", 64 * 2**30),
        ("1k", 1000.0),
        # apimachinery pkg/api/resource/quantity.go: <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>;
        # <number> may be ".<digits>"; suffix.go also reads n and u; E is exa, Ei exbi.
        ("129e6", 129e6),
        ("1E3", 1000.0),
        ("2e-3", 0.002),
        (".5", 0.5),
        ("100u", 1e-4),
        ("250n", 2.5e-7),
        ("1E", 1e18),
        ("1Ei", 2.0**60),
    ],
)
def test_quantities_read_as_numbers(text: str, value: float) -> None:
    assert quantity(text) == pytest.approx(value)


def test_a_pod_asks_for_its_containers_its_sidecars_the_largest_init_container_and_its_overhead() -> None:
    # k8s.io/component-helpers resource/helpers.go PodRequests: containers and restartPolicy=Always init
    # containers are summed; an ordinary init container counts with the sidecars started before it; the
    # largest of those wins if larger; spec.overhead is added.
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "2"}}}, {"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "500m"}}, "restartPolicy": "Always"},
            {"resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}}},
        ],
        "overhead": {"cpu": "250m"},
    }
    # cpu: max(2 + 0.5 (sidecar), 4 + 0.5 (init with the sidecar)) + 0.25; GPUs: max(1, 2).
    assert pod_requests(spec) == {"cpu": 4.5 + 0.25, "nvidia.com/gpu": 2.0}


def test_an_init_container_larger_than_the_trainer_is_charged_to_the_quota() -> None:
    job = v1("bert")
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["initContainers"] = [{"name": "warm", "resources": {"requests": {"cpu": "64"}}}]
    quota = w.resource_quota("cpu", {"requests.cpu": "100"}, {"requests.cpu": "40"})
    found = why(seen(job, quotas=[quota]))
    assert found.cause == c.QUOTA and found.sentence.endswith("and the job needs 128 more.")


def test_a_pod_whose_memory_is_written_with_an_exponent_is_counted_against_the_quota() -> None:
    others = v1_pods("gpt", phase="Running", node="gpu-node-0")
    for pod in others:
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64e9"
    quota = w.resource_quota("mem", {"requests.memory": "128e9"}, {"requests.memory": "128e9"})
    found = why(seen(v1("bert"), quotas=[quota], namespace_pods=others))
    assert found.cause == c.QUOTA
    assert "(by gpt 119.209Gi)" in found.sentence


def test_a_workload_kueue_evicted_says_by_whom() -> None:
    # kueue v0.19.2 workload_types.go: Evicted with reason Preempted (WorkloadEvictedByPreemption); the
    # message names the preemptor (pkg/scheduler/preemption/preemption.go preemptionMessage).
    job = v2("bert")
    preempted = w.kueue_preempted("wl-large", "uid-gpt-large")
    evicted = _workload(job, [_cond("Evicted", "True", "Preempted", preempted)], uid="wl-bert")
    found = why(seen(job, workload=evicted))
    assert found == c.Why(c.KUEUE, f"Kueue evicted it (Preempted: {preempted}) and has not admitted it again.")
