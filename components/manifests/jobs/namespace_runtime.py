"""The platform's runtimes once more in each namespace jobs run in, as TrainingRuntimes carrying
what a job there gets from the platform, for TrainJobs that come without the platform's runtime
patch (those the Kubeflow SDK creates).

A TrainingRuntime is found in the TrainJob's own namespace (kubeflow/trainer v2.3.0
``pkg/runtime/core/trainingruntime.go`` ``NewObjects``: the key is the TrainJob's namespace and
``runtimeRef.name``), and the SDK takes a namespaced runtime over a cluster one of the same name
(kubeflow 0.5.0 ``trainer/backends/kubernetes/backend.py`` ``get_runtime``, ``list_runtimes``), so
``runtime="ack-training-platform-torch"`` in a team's namespace gives that team's claims and uid.
"""

from __future__ import annotations

import copy

from ..base import Manifest
from .names import TRAINER_NODE
from .pod import JobContext, claim_mounts, claim_volumes


def namespace_runtime(runtime: Manifest, ctx: JobContext) -> Manifest:
    """``runtime`` (a platform ClusterTrainingRuntime) as a TrainingRuntime of the same name in
    ``ctx.namespace``.

    Its node pods mount the namespace's data claim read-only at ``/mnt/data`` and its output
    claim at ``/mnt/output``, run as the namespace's service account with the registry's pull
    secret, and as the team's uid and gid where ``ctx`` has them: what a job of the stack gets
    through its runtime patch, less its placement (a TrainJob names the pool with
    ``resourcesPerNode`` and the SDK's runtime patch options).
    """
    own = copy.deepcopy(runtime)
    own["kind"] = "TrainingRuntime"
    own["metadata"] = {**own["metadata"], "namespace": ctx.namespace}
    for rjob in own["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        if ctx.security_context:
            pod["securityContext"] = dict(ctx.security_context)
        if ctx.service_account:
            pod["serviceAccountName"] = ctx.service_account
        if ctx.image_pull_secret:
            pod["imagePullSecrets"] = [{"name": ctx.image_pull_secret}]
        pod["volumes"] = [*pod.get("volumes", []), *claim_volumes(ctx)]
        for container in pod["containers"]:
            if container["name"] == TRAINER_NODE:
                container["volumeMounts"] = [*container.get("volumeMounts", []), *claim_mounts()]
    return own
