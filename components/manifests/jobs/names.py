"""What the controllers expect of a job's objects: the Training Operator (v1)'s names and port of
each kind, Trainer v2's trainer job and API, and Kueue's API and topology annotations, a table that the
job commands, the alerts and the runtimes read without the job builders.

Container names, port names and default ports are those the operator reads to inject each
framework's settings (kubeflow/trainer v1.9.4 ``pkg/apis/kubeflow.org/v1/<kind>_types.go``,
``*DefaultContainerName``, ``*DefaultPortName``, ``*DefaultPort``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobKind:
    """What the operator expects of one kind.

    Args:
        kind: the object's kind.
        plural: its resource name (``kubectl get <plural>``).
        specs_key: the field under ``spec`` holding the replica specs.
        container: the container the operator injects its settings into.
        port_name: the port the operator reads for the addresses it injects.
        port: that port's default number.
    """

    kind: str
    plural: str
    specs_key: str
    container: str
    port_name: str
    port: int


KINDS = {
    "pytorch": JobKind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", "pytorchjob-port", 23456),
    "tensorflow": JobKind("TFJob", "tfjobs", "tfReplicaSpecs", "tensorflow", "tfjob-port", 2222),
    "xgboost": JobKind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", "xgboost", "xgboostjob-port", 9999),
    "mpi": JobKind("MPIJob", "mpijobs", "mpiReplicaSpecs", "mpi", "mpi-port", 9999),
    "jax": JobKind("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax", "jaxjob-port", 6666),
    "paddle": JobKind("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddle", "master", 36543),
}


MPI_LAUNCHER_ACCOUNT = "-launcher"
"""The v1 MPI Launcher's own ServiceAccount, ``<job>-launcher``. The operator creates the account
its template names, and binds it, alone, to the Role ``<job>-launcher`` that may exec into the
job's Workers (v1.9.4 ``pkg/controller.v1/mpi/mpijob_controller.go``
``getOrCreateLauncherServiceAccount``, ``newLauncherRole``, ``newLauncherRoleBinding``); its
``mpirun`` reaches them through ``kubectl exec`` with that token. Naming the shared jobs' account
there would hand that right to every pod that mounts the shared account's token."""

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
"""Trainer v2's API for TrainJobs and their runtimes."""
KUEUE_API = "kueue.x-k8s.io/v1beta2"
"""Kueue's API for queues (kubernetes-sigs/kueue v0.19.2 ``apis/kueue/v1beta2``)."""

TRAINER_NODE = "node"
"""The trainer's replicated job and container: Trainer v2 injects each framework's variables into the
container of this name in the job labelled as the trainer ancestor (``pkg/constants``: ``Node``,
``LabelTrainJobAncestor``), and the runtime webhook requires it (``validateReplicatedJobs``)."""
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
"""A pod set's request for Kueue's topology-aware scheduling, read from the pod template's annotations
of each replicated job of the JobSet a TrainJob becomes (kubernetes-sigs/kueue v0.19.2
``apis/kueue/v1beta2/topology_types.go``; ``pkg/controller/jobs/jobset/jobset_controller.go`` ``PodSets``)."""
