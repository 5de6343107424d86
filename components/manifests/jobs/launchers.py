"""The command a job's own code starts with, per launcher, and where that code comes from.

What the operators provide, on which the launchers' flags are built:

- a v1 PyTorchJob with a Master gives every pod ``MASTER_ADDR``/``PET_MASTER_ADDR``,
  ``MASTER_PORT``/``PET_MASTER_PORT``, ``WORLD_SIZE``, ``RANK`` and ``PET_NODE_RANK`` (the pod's
  index, Master first), and ``PET_NPROC_PER_NODE`` from ``nprocPerNode`` (kubeflow/trainer
  v1.9.4 ``pkg/controller.v1/pytorch/envvar.go`` ``setPodEnv``, ``master.go``);
- a v2 TrainJob gives ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
  ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT`` (v2.3.0 ``pkg/runtime/framework/plugins/torch/torch.go``).

So ``PET_MASTER_*`` and ``PET_NODE_RANK`` mean the same on both backends; Kubernetes expands
``$(NAME)`` in a command from the container's environment, operator-injected variables included.
"""

from __future__ import annotations

import shlex

from ...config import TrainingJobSpec
from ...config.base import CODE_MOUNT
from ..base import Manifest

EXIT_WRAPPER = ["python", "-m", "trainer.run"]
"""Runs one command and exits with a status the restart policy can act on (see ``trainer/run.py``)."""
TORCHRUN = ["python", "-m", "trainer.launch"]


MAX_POD_RESTARTS = "--max-pod-restarts"
"""``trainer.launch``'s bound on a pod's retries in a row (``trainer/restarts.py``)."""


def counts_restarts(job: TrainingJobSpec, backend: str = "v1") -> bool:
    """Whether the pods' launcher bounds their retries itself: on v1 under ``restartPolicy:
    ExitCode``, where the operator re-creates a failed pod instead of restarting it, so
    ``backoffLimit`` never counts the failure (``trainer/restarts.py`` cites the operator's
    code). ``OnFailure`` restarts the container in place, which ``backoffLimit`` counts; on v2
    the JobSet's ``maxRestarts`` counts whole-job restarts. The bundled trainer only: the count
    resets when it commits a checkpoint."""
    return backend == "v1" and job.restart_policy == "ExitCode" and job.command is None


def torchrun_command(job: TrainingJobSpec, procs: int, backend: str) -> list[str]:
    """``trainer.launch`` (torchrun with retryable statuses) and the flags the backend leaves to it.

    On v1 the operator injects ``PET_NPROC_PER_NODE`` only for jobs with a Master, so an elastic
    job would start one process per node without the flag; torchrun does not read the
    operator's ``MASTER_ADDR``/``MASTER_PORT``, so a fixed multi-node job would rendezvous with
    itself at 127.0.0.1:29500 without them. v2 injects all of torchrun's settings.
    """
    launcher = list(TORCHRUN)
    if counts_restarts(job, backend):
        launcher.append(f"{MAX_POD_RESTARTS}={job.run_policy.backoff_limit}")
    if backend == "v1":
        launcher.append(f"--nproc-per-node={procs}")
        if job.elastic is None and job.nodes > 1:
            launcher += ["--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
    return launcher


def launcher_command(job: TrainingJobSpec, procs: int, gpus: int, backend: str) -> list[str]:
    """The container command for ``job.command`` under ``job.launcher``.

    - ``torchrun``: the script under ``trainer.launch``;
    - ``deepspeed``: the same: DeepSpeed's own launcher reaches other nodes over ssh/pdsh,
      which pods lack, and ``deepspeed.init_distributed`` reads torchrun's environment
      (microsoft/DeepSpeed#2679, the maintainers' answer for Kubernetes);
    - ``accelerate``: ``accelerate launch`` with the world from the operator;
    - ``python``: one process per pod.

    The last two run under ``trainer.run``, which turns a signal into ``128 + N``.
    """
    command = list(job.command or [])
    if job.launcher in ("torchrun", "deepspeed"):
        return [*torchrun_command(job, procs, backend), *command, *job.args]
    if job.launcher == "accelerate":
        world = [
            f"--num_machines={job.nodes}",
            f"--num_processes={job.nodes * procs}",
            "--machine_rank=$(PET_NODE_RANK)",
            "--main_process_ip=$(PET_MASTER_ADDR)",
            "--main_process_port=$(PET_MASTER_PORT)",
        ]
        device = ["--multi_gpu"] if gpus and job.nodes * procs > 1 else ["--cpu"] if not gpus else []
        return [*EXIT_WRAPPER, "accelerate", "launch", *world, *device, *command, *job.args]
    if job.launcher == "python":
        return [*EXIT_WRAPPER, "python", *command, *job.args]
    return [*command, *job.args]


def code_fields(job: TrainingJobSpec) -> tuple[Manifest, list[Manifest], list[Manifest]]:
    """What a pod needs for code not in its image: the container's ``workingDir`` and mounts,
    and the pod's init containers and volumes.

    Returns:
        (container fields, init containers, volumes).
    """
    code = job.code
    if code is None:
        return {}, [], []
    if code.path is not None:
        return {"workingDir": code.path}, [], []
    mount = {"name": "code", "mountPath": CODE_MOUNT}
    # A fetch of the one commit, not a clone of a branch: the pods of every restart run the
    # same code, and the repository's history is not downloaded.
    script = " && ".join(
        [
            f"git init -q {CODE_MOUNT}",
            f"cd {CODE_MOUNT}",
            f"git fetch -q --depth=1 {shlex.quote(code.git_url or '')} {code.commit}",
            "git checkout -q FETCH_HEAD",
        ]
    )
    clone = {
        "name": "clone-code",
        "image": code.clone_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
        "volumeMounts": [dict(mount)],
    }
    return {"workingDir": CODE_MOUNT, "volumeMounts": [mount]}, [clone], [{"name": "code", "emptyDir": {}}]
