"""Emitted PyTorchJobs run in the training image as the Training Operator starts them, and
emitted TrainJobs as Kubeflow Trainer v2 starts them, without Docker or a cluster.

The image is what ``trainer/Dockerfile`` builds: its COPY sources under a temporary root,
its ENV and WORKDIR, its user. A v1 pod's environment is the image's, then the container's
from the job, then what the operator (v1.9) appends; a v2 pod's is the image's, then the
runtime's, then the TrainJob's, then what Trainer v2.3.0's torch plugin sets. Commands get
Kubernetes' ``$(VAR)`` expansion. Absolute paths (the image's and the volumes' mount
points) live under the root. The Master's Service resolves to 127.0.0.1, and as every pod
shares this host's ports, the Master's port is a free one rather than the container port.
Pods run as this test's user (the interpreter here may be out of the image user's reach);
a separate test checks that user against a fresh volume's permissions.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, free_port
from fixtures.local_cluster import expand
from fixtures.trainer_pods import trainer_container, trainer_pods

from components.config import TrainingJobSpec
from components.manifests import CPU_PLACEMENT, JobContext, pytorch_job, train_job, training_runtime

DOCKERFILE = ROOT / "trainer" / "Dockerfile"
PORT_NAME = "pytorchjob-port"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines if line and line[0] != "#"]


@dataclass
class Image:
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    users: dict[str, int] = field(default_factory=dict)
    user: str = "root"
    base: str = ""
    entrypoint: list[str] = field(default_factory=list)

    def path(self, inside: str) -> Path:
        return self.root / inside.lstrip("/")


def build(root: Path) -> Image:
    """Apply the Dockerfile to ``root``; an instruction this emulation does not know fails."""
    image, args = Image(root), {}
    # The base image's /tmp, open to every uid with the sticky bit, as in any Ubuntu image.
    image.path("/tmp").mkdir(parents=True)
    image.path("/tmp").chmod(0o1777)
    for op, rest in instructions():
        if op == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
        elif op == "FROM":
            image.base = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], rest)
        elif op == "RUN":
            # The base image's pip and shell are not here; the user it adds is.
            if match := re.search(r"useradd .*--create-home --uid (\d+) (\w+)", rest):
                image.users[match[2]] = int(match[1])
                image.path(f"/home/{match[2]}").mkdir(parents=True)
            for mode, made in re.findall(r"install -d -m (\d+) (\S+)", rest):
                image.path(made).mkdir(parents=True, exist_ok=True)
                image.path(made).chmod(int(mode, 8))
        elif op == "WORKDIR":
            image.workdir = rest
            image.path(rest).mkdir(parents=True, exist_ok=True)
        elif op == "COPY":
            *flags, source, dest = shlex.split(rest)
            assert all(f.startswith("--chown=") for f in flags), flags
            shutil.copytree(ROOT / source, image.path(dest), ignore=shutil.ignore_patterns("__pycache__"))
        elif op == "ENV":
            image.env.update(pair.split("=", 1) for pair in shlex.split(rest))
        elif op == "USER":
            image.user = rest
        elif op == "ENTRYPOINT":
            image.entrypoint = json.loads(rest)
        elif op != "CMD":
            raise AssertionError(f"trainer/Dockerfile: {op} is not emulated here")
    return image


def test_image_is_pinned_non_root_and_launches_the_trainer_under_torchrun(tmp_path: Path) -> None:
    image = build(tmp_path)
    pinned = re.search(r"^torch==(\S+)$", (ROOT / "requirements-dev.txt").read_text(), re.M)[1]
    assert image.base.startswith(f"pytorch/pytorch:{pinned}-cuda") and image.base.endswith("-runtime")
    assert image.user != "root" and image.users[image.user] != 0
    assert image.entrypoint == ["python", "-m", "trainer.launch"]
    assert image.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert (image.path(image.env["PYTHONPATH"]) / "trainer" / "__main__.py").is_file()


def operator_env(job: dict[str, Any], replica: str, index: int, port: int) -> dict[str, str]:
    """What training-operator v1.9 appends to a container (``envvar.go``, ``master.go``,
    ``elastic.go``); the Services it names resolve to 127.0.0.1 here."""
    spec = job["spec"]
    replicas = sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
    env = {"PYTHONUNBUFFERED": "0"}
    if "Master" in spec["pytorchReplicaSpecs"]:
        nproc = spec["nprocPerNode"]
        rank = index + (1 if replica == "Worker" else 0)
        env |= {
            "MASTER_PORT": str(port),
            "MASTER_ADDR": "127.0.0.1",
            "WORLD_SIZE": str(replicas * (int(nproc) if nproc.isdigit() else 1)),
            "RANK": str(rank),
            "PET_NPROC_PER_NODE": nproc,
            "PET_NODE_RANK": str(rank),
        }
    if elastic := spec.get("elasticPolicy"):
        # No PET_NPROC_PER_NODE here: v1.9 takes it only from the deprecated
        # elasticPolicy.nProcPerNode.
        env |= {
            "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}",
            "PET_RDZV_BACKEND": elastic["rdzvBackend"],
            "PET_NNODES": f"{elastic['minReplicas']}:{elastic['maxReplicas']}",
            "PET_MAX_RESTARTS": str(elastic["maxRestarts"]),
        }
    else:
        env["PET_NNODES"] = str(replicas)
    return env


@pytest.fixture
def default_port_taken() -> Iterator[None]:
    """torchrun's default rendezvous port, held: on one host every pod's 127.0.0.1 is the
    same machine, so only this shows a command that ignores MASTER_ADDR and MASTER_PORT
    (in a cluster each node would rendezvous with itself)."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("", 29500))
        holder.listen()
    except OSError:
        pass  # already held by someone else, which serves as well
    yield
    holder.close()


def start_pod(command: list[str], env: dict[str, str], image: Image) -> subprocess.Popen:
    """One pod's container: ``env`` over the image's, paths under the image root, the
    command ``$(VAR)``-expanded."""
    env = {**image.env, **env}
    env = {k: str(image.path(v)) if v.startswith("/") else v for k, v in env.items()}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # the base image's python
    env["HOME"] = str(image.path(f"/home/{image.user}"))
    return subprocess.Popen(
        [expand(word, env) for word in command],
        cwd=image.path(image.workdir),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(pods: list[subprocess.Popen]) -> list[tuple[int, str]]:
    """Each pod's exit status and output; all are killed when one hangs."""
    results = []
    for pod in pods:
        try:
            out, _ = pod.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for other in pods:
                other.kill()
            out, _ = pod.communicate()
        results.append((pod.returncode, out))
    return results


def run_pods(job: dict[str, Any], image: Image) -> list[tuple[int, str]]:
    """Start every replica's pod as the operator would and wait for all of them."""
    port = free_port()  # the Master's, or for elastic jobs the rendezvous endpoint's
    pods = []
    for replica, replica_spec in job["spec"]["pytorchReplicaSpecs"].items():
        for index in range(replica_spec["replicas"]):
            container = replica_spec["template"]["spec"]["containers"][0]
            env = {
                **{e["name"]: e["value"] for e in container["env"] if "value" in e},
                **operator_env(job, replica, index, port),
            }
            pods.append(start_pod(container["command"], env, image))
    return wait_for(pods)


def run_trainjob_pods(job: dict[str, Any], runtime: dict[str, Any], image: Image) -> list[tuple[int, str]]:
    """Start one pod per node of a TrainJob as Trainer v2 would (``fixtures.trainer_pods``)
    and wait for all of them. Node 0's name (under JobSet's headless Service) resolves to
    127.0.0.1 here and the trainer port is a free one, since every pod shares this host."""
    port = free_port()
    node = trainer_container(job, runtime)
    pods = []
    for pod in trainer_pods(job, runtime, port=port).values():
        # The stack's TrainJobs set TRAINING_JOB, which the runtime's downward-API entries only build.
        env = {e["name"]: e["value"] for e in node["env"] if "value" in e} | pod.env | {"PET_MASTER_ADDR": "127.0.0.1"}
        pods.append(start_pod(node["command"], env, image))
    return wait_for(pods)


def fresh_nas_volume(path: Path) -> Path:
    """A shared volume's directory as the NAS CSI plugin leaves it on first mount: created
    by root, then chmodded 0777 so that any uid can write (alibaba-cloud-csi-driver v1.34.1
    and later, ``pkg/nas/utils.go``, for a static volume whose path is missing)."""
    path.mkdir(mode=0o755, parents=True)
    path.chmod(0o777)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the image's user needs root")
def test_the_image_user_can_create_job_directories_in_a_fresh_volume() -> None:
    root = Path(tempfile.mkdtemp(prefix="volumes-"))
    root.chmod(0o755)  # pytest's own temporary directories are closed to other users
    try:
        image = build(root)
        uid = image.users[image.user]
        for volume, writable in ((fresh_nas_volume(root / "output"), True), (root / "plain", False)):
            volume.mkdir(mode=0o755, exist_ok=True)
            made = subprocess.run(["mkdir", str(volume / "job")], user=uid, group=uid, extra_groups=[], check=False)
            assert (made.returncode == 0) is writable, volume
    finally:
        shutil.rmtree(root)


def test_a_teams_uid_can_write_what_the_kubeflow_sdk_writes() -> None:
    # A CustomTrainer's command writes its function into the working directory and installs its
    # packages with `pip install --user` into the home (kubeflow 0.5.0 trainer/constants/constants.py,
    # backends/kubernetes/utils.py), as a team's uid, which the image does not know.
    root = Path(tempfile.mkdtemp(prefix="sdk-"))
    root.chmod(0o755)
    try:
        image = build(root)
        [node] = training_runtime()["spec"]["template"]["spec"]["replicatedJobs"]
        [container] = node["template"]["spec"]["template"]["spec"]["containers"]
        home = next(item["value"] for item in container["env"] if item["name"] == "HOME")
        team_uid = 2001
        assert team_uid not in image.users.values()
        function, packages = image.path(image.workdir) / "train_func.py", image.path(home) / ".local"
        for write in (["sh", "-c", f"echo 'print(1)' > {function}"], ["mkdir", str(packages)]):
            made = subprocess.run(
                write,
                user=team_uid,
                group=team_uid,
                extra_groups=[],
                capture_output=True,
                check=False,
            )
            assert made.returncode == 0, (write, made.stderr)
    finally:
        shutil.rmtree(root)


def volumes(image: Image) -> Path:
    """The data volume with a small real dataset, and a fresh output volume."""
    data = image.path("/mnt/data")
    data.mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.savez(data / "train.npz", images=rng.integers(0, 256, (256, 1, 28, 28), np.uint8), labels=np.arange(256) % 10)
    return fresh_nas_volume(image.path("/mnt/output"))


CPU_CONTEXT = JobContext(
    namespace="training", image="trainer:0.1.0", gpus=0, placement=CPU_PLACEMENT, data_claim="data", output_claim="out"
)
"""What an emitted CPU job takes from the platform, as the image tests run it."""
CPU_JOB = {"gpus_per_node": 0, "cpu": "2", "memory": "4Gi", "trainer": {"max_steps": 12, "batch_size": 8}}


@pytest.mark.parametrize(
    ("name", "shape", "world"),
    [
        ("one-node", {"procs_per_node": 2}, 2),
        ("two-nodes", {"nodes": 2, "procs_per_node": 1}, 2),
        ("elastic", {"elastic": {"min_nodes": 1, "max_nodes": 2}, "procs_per_node": 2}, 4),
    ],
)
def test_emitted_job_trains_in_the_image(
    name: str, shape: dict[str, Any], world: int, default_port_taken: None
) -> None:
    root = Path(tempfile.mkdtemp(prefix="image-"))
    try:
        image = build(root)
        output = volumes(image)
        spec = TrainingJobSpec(name=name, image="trainer:0.1.0", **shape, **CPU_JOB)
        assert_trained(run_pods(pytorch_job(spec, CPU_CONTEXT), image), output / name, world)
    finally:
        shutil.rmtree(root)


def assert_trained(results: list[tuple[int, str]], output: Path, world: int) -> None:
    """Every pod exited 0 after training on ``world`` processes, with the final model and
    the last checkpoint in the job's output directory."""
    assert [code for code, _ in results] == [0] * len(results), results
    assert f"training cnn on {world} process(es)" in "".join(log for _, log in results)
    assert "256 samples" in results[0][1]
    assert (output / "final_model.pt").is_file()
    # maxSteps alone sets no epoch limit: all 12 steps run (an epoch of the elastic job is 8).
    assert (output / "checkpoints" / f"step-{12:09d}").is_dir()


@pytest.mark.parametrize(
    ("name", "shape"),
    [("v2-one-node", {"procs_per_node": 2}), ("v2-two-nodes", {"nodes": 2, "procs_per_node": 1})],
)
def test_emitted_trainjob_trains_in_the_image_as_trainer_v2_starts_it(
    name: str, shape: dict[str, Any], default_port_taken: None
) -> None:
    root = Path(tempfile.mkdtemp(prefix="image-"))
    try:
        image = build(root)
        output = volumes(image)
        spec = TrainingJobSpec(name=name, image="trainer:0.1.0", backend="v2", **shape, **CPU_JOB)
        assert_trained(run_trainjob_pods(train_job(spec, CPU_CONTEXT), training_runtime(), image), output / name, 2)
    finally:
        shutil.rmtree(root)


def test_image_packages_are_pinned_by_hash_to_the_tested_versions() -> None:
    (run,) = [rest for op, rest in instructions() if op == "RUN" and "pip install" in rest]
    assert "--require-hashes" in run and "--no-deps" in run and "trainer/image-requirements.txt" in run
    text = re.sub(r"\\\n", " ", (ROOT / "trainer" / "image-requirements.txt").read_text())
    pins = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            requirement, *hashes = line.split()
            assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), line
            name, version = requirement.split("==")
            pins[name] = version
    tested = dict(re.findall(r"^([\w-]+)==(\S+)$", (ROOT / "requirements-dev.txt").read_text(), re.M))
    for name in ("numpy", "safetensors", "prometheus-client", "tensorboard"):
        assert pins[name] == tested[name], name
