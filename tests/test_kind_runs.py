"""Emitted XGBoostJobs and MPIJobs run as the Training Operator v1.9.4 starts their pods: each
pod is a local process on the stand-in cluster of ``fixtures.local_cluster``, with its
container's command and environment from the builder, plus exactly what
``fixtures.operator_pods`` says the operator adds. The port the operator reads from the
manifest is set to a free one first, as every pod shares this host's ports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, free_port, missing
from fixtures.local_cluster import STUCK_S, Cluster, Mutation, wait_all, with_env, with_file, without_env
from fixtures.operator_pods import MPI_CONFIG_DIR, MPI_HOSTFILE, MPI_WORKER_IDLE, operator_pods, replica_containers
from test_jobs import IMAGE, context

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, KINDS, kubeflow_job

DOC = ROOT / "docs" / "job-kinds.md"


def documented_xgboost_program(tracker_address: str = "MASTER_ADDR") -> str:
    """The XGBoost program docs/job-kinds.md shows for the backend whose variable holds the
    tracker's address (``MASTER_ADDR`` on v1, ``DMLC_TRACKER_URI`` on v2): rank 0 starts the
    collective tracker there for the world's workers, and every rank, rank 0 included, trains
    its shard of the data through it and saves the model."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if "RabitTracker" in block and f'os.environ["{tracker_address}"]' in block)


MPI_PROGRAM = """\
import json, os
print(json.dumps({
    "rank": int(os.environ["OMPI_COMM_WORLD_RANK"]),
    "size": int(os.environ["OMPI_COMM_WORLD_SIZE"]),
    "pod": os.environ["HOSTNAME"],
}), flush=True)
"""
"""One MPI rank: where Open MPI put it, read from the variables ``mpirun`` gives each rank."""


def emitted(job: TrainingJobSpec) -> dict[str, Any]:
    """The builder's object, with the port the operator reads set to a free one."""
    manifest = deepcopy(kubeflow_job(job, context(CPU_PLACEMENT, 0)))
    kind = KINDS[job.framework]
    port = free_port()
    for spec in manifest["spec"][kind.specs_key].values():
        for p in spec["template"]["spec"]["containers"][0].get("ports", []):
            if p["name"] == kind.port_name:
                p["containerPort"] = port
    return manifest


def v1_cluster(manifest: dict[str, Any], tmp_path: Path, wrong: Mutation | None = None) -> Cluster:
    """The pods of an emitted v1 job, with what the operator adds (or ``wrong`` one's)."""
    return Cluster(replica_containers(manifest), operator_pods(manifest), tmp_path, wrong)


# ---- XGBoost -------------------------------------------------------------------------------


def xgboost() -> Any:
    try:
        import xgboost as found
    except ImportError:
        missing(
            "xgboost",
            ci="requirements-kinds.txt pins xgboost-cpu, which ./dev test installs",
            install="./dev test, or pip install -r requirements-kinds.txt, brings xgboost-cpu",
        )
    return found


def xgboost_job(nodes: int = 2) -> TrainingJobSpec:
    return TrainingJobSpec(
        name="xgb",
        image=IMAGE,
        framework="xgboost",
        nodes=nodes,
        gpus_per_node=0,
        launcher="python",
        command=["train_xgb.py"],
    )


def run_xgboost(
    tmp_path: Path, wrong: Mutation | None = None, timeout: float = 90
) -> tuple[list[tuple[int, str]], Cluster]:
    cluster = v1_cluster(emitted(xgboost_job()), tmp_path, wrong)
    (cluster.workdir / "train_xgb.py").write_text(documented_xgboost_program())
    procs = [cluster.start(replica, index) for replica, index in cluster.pods]
    return wait_all(procs, timeout=timeout), cluster


def test_xgboost_pods_get_the_operators_rank_world_and_master() -> None:
    pods = operator_pods(emitted(xgboost_job(nodes=3)))
    master, port = pods[("Master", 0)], pods[("Master", 0)].env["MASTER_PORT"]
    assert master.name == "xgb-master-0" and master.command is None and master.files == {}
    assert [(pod.name, pod.env["RANK"]) for pod in pods.values()] == [
        ("xgb-master-0", "0"),
        ("xgb-worker-0", "1"),
        ("xgb-worker-1", "2"),
    ]
    for pod in pods.values():
        assert pod.env == pod.env | {
            "MASTER_ADDR": "xgb-master-0",
            "MASTER_PORT": port,
            "WORLD_SIZE": "3",
            "WORKER_ADDRS": "xgb-worker-0,xgb-worker-1",
            "WORKER_PORT": port,
        }


def test_xgboost_pods_get_the_operators_variables_in_every_container() -> None:
    # v1.9.4 pkg/controller.v1/xgboost/xgboost.go SetPodEnv loops over every container of the
    # pod template (Spec.Containers, not the init containers) and appends the same variables.
    manifest = emitted(xgboost_job(nodes=2))
    pod = manifest["spec"]["xgbReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    pod["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    pods = operator_pods(manifest)
    assert pods[("Master", 0)].containers == ("xgboost",)
    assert pods[("Worker", 0)].containers == ("xgboost", "sidecar")


def test_an_xgboost_job_trains_one_model_across_its_pods(tmp_path: Path) -> None:
    xgb = xgboost()
    results, cluster = run_xgboost(tmp_path)
    assert [status for status, _ in results] == [0, 0], results
    assert_one_model_of_both_shards(xgb, Path(cluster.env("Master", 0)["OUTPUT_PATH"]))


def assert_one_model_of_both_shards(xgb: Any, output: Path) -> None:
    """Both ranks saved the same model, and it saw both shards: rank 0's shard alone grows
    other trees."""
    models = [(output / f"model-{rank}.json").read_bytes() for rank in (0, 1)]
    assert models[0] == models[1]
    alone = xgb.train(
        {"objective": "binary:logistic", "tree_method": "hist", "max_depth": 3, "nthread": 1},
        xgb.DMatrix(*shard(0, 2)),
        num_boost_round=4,
    )
    assert alone.save_raw("json") != models[0]


def shard(rank: int, world: int) -> tuple[Any, Any]:
    """One rank's share of the documented program's data."""
    features = np.random.default_rng(0).normal(size=(400, 4))
    labels = (features[:, 0] + features[:, 1] > 0).astype(int)
    return features[rank::world], labels[rank::world]


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(with_env("Worker", RANK="{index}"), id="worker-rank-without-the-master-offset"),
        pytest.param(with_env("Worker", RANK="2"), id="worker-rank-off-by-one"),
        pytest.param(with_env("Master", WORLD_SIZE="1"), id="world-size-of-the-workers-only"),
        pytest.param(with_env("Worker", MASTER_ADDR="xgb-master"), id="master-addr-without-the-index"),
    ],
)
def test_a_wrong_xgboost_variable_fails_the_run(tmp_path: Path, wrong: Mutation) -> None:
    xgboost()
    results, _ = run_xgboost(tmp_path, wrong, STUCK_S)
    assert any(status != 0 for status, _ in results), results


# ---- MPI -----------------------------------------------------------------------------------


def mpirun() -> str:
    found = shutil.which("mpirun")
    if found is None:
        missing("mpirun", ci=".ci/run installs Debian's openmpi-bin", install="Debian: apt-get install openmpi-bin")
    return found


SLOTS = (os.cpu_count() or 1) + 1
"""More slots than this host has cores: Open MPI gives a hostfile line without ``slots=`` one
slot per core, so only then does a lost slot count show."""


def mpi_job() -> TrainingJobSpec:
    return TrainingJobSpec(
        name="mpi",
        image=IMAGE,
        framework="mpi",
        nodes=2,
        gpus_per_node=0,
        procs_per_node=SLOTS,
        command=["mpirun", "python", "ranks.py"],
    )


def run_mpi(tmp_path: Path, wrong: Mutation | None = None) -> tuple[int, str, list[dict[str, Any]]]:
    """The Launcher's ``mpirun`` as the operator starts it; the Workers idle (``sleep``) and
    ``kubectl exec`` runs the ranks in their environment. Returns the Launcher's status, its
    output, and what each rank said."""
    cluster = v1_cluster(emitted(mpi_job()), tmp_path, wrong)
    (cluster.workdir / "ranks.py").write_text(MPI_PROGRAM)
    cluster.mount()
    ((status, out),) = wait_all([cluster.start("Launcher", 0)], timeout=60)
    # Ranks' lines reach the Launcher through Open MPI's forwarding, not always whole lines.
    ranks = [json.loads(line) for line in re.findall(r"\{[^{}]*\}", out)]
    return status, out, ranks


def test_mpi_pods_get_the_operators_hostfile_and_remote_shell() -> None:
    manifest = emitted(mpi_job())
    pods = operator_pods(manifest)
    launcher = pods[("Launcher", 0)]
    assert launcher.name == "mpi-launcher" and launcher.command is None
    assert launcher.files[MPI_HOSTFILE] == f"mpi-worker-0 slots={SLOTS}\nmpi-worker-1 slots={SLOTS}\n"
    assert launcher.env == {
        "OMPI_MCA_plm_rsh_agent": f"{MPI_CONFIG_DIR}/kubexec.sh",
        "OMPI_MCA_orte_default_hostfile": MPI_HOSTFILE,
        "NVIDIA_VISIBLE_DEVICES": "",
        "NVIDIA_DRIVER_CAPABILITIES": "",
        "I_MPI_HYDRA_BOOTSTRAP": "rsh",
        "I_MPI_HYDRA_BOOTSTRAP_EXEC": f"{MPI_CONFIG_DIR}/kubexec.sh",
    }
    workers = [pods[("Worker", i)] for i in (0, 1)]
    assert [w.name for w in workers] == ["mpi-worker-0", "mpi-worker-1"]
    assert all(w.command == MPI_WORKER_IDLE and list(w.files) == [f"{MPI_CONFIG_DIR}/kubexec.sh"] for w in workers)
    # A Launcher with a GPU is a host too, and keeps the GPUs visible.
    manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}
    }
    gpu_launcher = operator_pods(manifest)[("Launcher", 0)]
    assert gpu_launcher.files[MPI_HOSTFILE].splitlines()[0] == f"mpi-launcher slots={SLOTS}"
    assert "NVIDIA_VISIBLE_DEVICES" not in gpu_launcher.env


def test_mpirun_in_the_launcher_starts_every_slot_of_every_worker(tmp_path: Path) -> None:
    mpirun()
    status, out, ranks = run_mpi(tmp_path)
    assert status == 0, out
    world = 2 * SLOTS
    assert sorted(r["rank"] for r in ranks) == list(range(world)), out
    assert {r["size"] for r in ranks} == {world}
    # Open MPI fills each host's slots in hostfile order.
    assert all(r["pod"] == f"mpi-worker-{r['rank'] // SLOTS}" for r in ranks), ranks


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(
            with_file(MPI_HOSTFILE, lambda text: re.sub(r" slots=\d+", "", text)), id="hostfile-without-slots"
        ),
        pytest.param(with_file(MPI_HOSTFILE, lambda text: text.replace(f"slots={SLOTS}", "slots=1")), id="one-slot"),
        pytest.param(with_file(MPI_HOSTFILE, lambda text: text.replace("worker-", "worker")), id="other-pod-names"),
        pytest.param(without_env("OMPI_MCA_orte_default_hostfile"), id="no-hostfile"),
    ],
)
def test_a_wrong_mpi_setting_fails_the_run(tmp_path: Path, wrong: Mutation) -> None:
    mpirun()
    status, out, ranks = run_mpi(tmp_path, wrong)
    world = 2 * SLOTS
    good = status == 0 and sorted(r["rank"] for r in ranks) == list(range(world))
    good = good and all(r["size"] == world and r["pod"] == f"mpi-worker-{r['rank'] // SLOTS}" for r in ranks)
    assert not good, out


def test_the_kinds_not_derived_here_are_refused() -> None:
    with pytest.raises(ValueError, match="only XGBoostJob, MPIJob, PaddleJob, TFJob and JAXJob pods are derived here"):
        operator_pods({"kind": "PyTorchJob", "metadata": {"name": "p"}, "spec": {}})
    manifest = emitted(xgboost_job())
    manifest["spec"]["xgbReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"] = []
    with pytest.raises(ValueError, match="the xgboost container has no port named xgboostjob-port"):
        operator_pods(manifest)
