"""The stack's ``jobDefaults`` output: what a job takes from the platform, as plain data.

``pulumi up`` exports it from the same :class:`JobContext` its own jobs are built with, and
``ack-jobs submit`` reads it back, so a job submitted from the command line lands on the same
pool, claims, service account, pull secret and queue as one declared in the stack. It holds
no secret: names of objects, not credentials.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ...config import Backend
from ...config.gpus.capacity import NodeShare
from ..fabrics import FABRICS
from ..placement import Placement
from .pod import JobContext


def job_defaults(ctx: JobContext, *, backend: Backend, registry: Any = None) -> dict[str, Any]:
    """The ``jobDefaults`` export of a stack.

    Args:
        ctx: the context the stack builds its jobs with; its ``image`` and ``gpus`` are not
            exported (a submitted job names its own image; ``gpusPerNode`` is the pool's).
        backend: the stack's ``training.backend``.
        registry: the registry repository URL jobs pull ``--image-tag`` from (may be a Pulumi
            output), or ``None`` without a registry.

    Returns:
        A JSON-ready dict that :func:`context_from_defaults` turns back into a context.
    """
    placement = ctx.placement
    return {
        "namespace": ctx.namespace,
        "backend": backend,
        "registry": registry,
        "placement": {
            "nodeSelector": dict(placement.node_selector),
            "tolerations": [dict(t) for t in placement.tolerations],
            "gpusPerNode": placement.gpus_per_node,
            "fabric": placement.fabric.name if placement.fabric is not None else None,
            "maxNodes": placement.max_nodes,
            "node": asdict(placement.node) if placement.node is not None else None,
        },
        "dataClaim": ctx.data_claim,
        "outputClaim": ctx.output_claim,
        "serviceAccount": ctx.service_account,
        "imagePullSecret": ctx.image_pull_secret,
        "queue": ctx.queue,
        "securityContext": ctx.security_context,
        "topologyLevels": list(ctx.topology_levels),
    }


def context_from_defaults(defaults: dict[str, Any], *, image: str, gpus: int, backend: Backend) -> JobContext:
    """The job context a submitted job is built with.

    Args:
        defaults: a stack's ``jobDefaults`` output.
        image: the job's pinned image.
        gpus: GPUs per pod of the job.
        backend: the backend the job runs on; only v2 jobs join the queue (Kueue).

    Returns:
        The context :func:`pytorch_job` or :func:`train_job` takes.
    """
    placement = defaults["placement"]
    return JobContext(
        namespace=defaults["namespace"],
        image=image,
        gpus=gpus,
        placement=Placement(
            node_selector=dict(placement["nodeSelector"]),
            tolerations=tuple(dict(t) for t in placement["tolerations"]),
            gpus_per_node=placement["gpusPerNode"],
            fabric=FABRICS[placement["fabric"]] if placement["fabric"] else None,
            max_nodes=placement["maxNodes"],
            node=NodeShare(**placement["node"]) if placement.get("node") else None,
        ),
        data_claim=defaults["dataClaim"],
        output_claim=defaults["outputClaim"],
        service_account=defaults["serviceAccount"],
        image_pull_secret=defaults["imagePullSecret"],
        queue=defaults["queue"] if backend == "v2" else None,
        security_context=defaults.get("securityContext"),
        topology_levels=tuple(defaults.get("topologyLevels", ())) if backend == "v2" else (),
    )
