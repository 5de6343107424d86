"""Where this process sits in the job: rank, world, device and intra-op threads; and the
gather of a small tensor from every rank."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

LOST_PEER_SIGNS = ("gloo/transport", "Connection reset by peer", "Connection closed by peer")
"""How gloo reports a peer that went away mid-collective: a plain RuntimeError raised from its
TCP transport, e.g. ``[.../gloo/transport/tcp/pair.cc:537] Read error [...]: Connection reset
by peer`` (torch 2.13, seen when another pod's process is killed during backward)."""


def lost_peer(err: RuntimeError) -> bool:
    """Whether ``err`` says another process of the job is gone (a node lost, a pod killed)
    rather than that this process failed: torch's distributed errors (``DistError``: the
    backend, the store, the network; NCCL reports through them), or gloo's transport error.
    A retry can succeed once the job's pods are back."""
    return isinstance(err, torch.distributed.DistError) or any(sign in str(err) for sign in LOST_PEER_SIGNS)


def cpu_quota() -> int:
    """CPUs this process may use: the cgroup quota when one is set, else its affinity."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            return max(1, int(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return len(os.sched_getaffinity(0))


def default_threads(local_world: int) -> int:
    """Intra-op threads: ``OMP_NUM_THREADS`` when given, else the CPU quota shared out
    among the local processes (oversubscribing costs ~40% on CPU)."""
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return int(os.environ["OMP_NUM_THREADS"])
    return max(1, cpu_quota() // local_world)


@dataclass(frozen=True)
class Topology:
    rank: int
    world: int
    local_rank: int
    local_world: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def topology() -> Topology:
    env = os.environ
    local_rank = int(env.get("LOCAL_RANK", 0))  # the operator sets no LOCAL_RANK outside torchrun
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    return Topology(
        int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), local_rank, int(env.get("LOCAL_WORLD_SIZE", 1)), device
    )


def gather(topo: Topology, tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's copy of a fixed-size tensor, in rank order, on the CPU; a single process
    gets its own back as it is. A collective when there are several processes.
    ``all_gather_object`` needs NumPy in some builds; plain tensors do not."""
    if topo.world == 1:
        return [tensor]
    on_device = tensor.to(topo.device)
    gathered = [torch.empty_like(on_device) for _ in range(topo.world)]
    torch.distributed.all_gather(gathered, on_device)
    return [t.cpu() for t in gathered]


def prepare_flight_recorder() -> None:
    """Create the directory the NCCL flight recorder dumps into on a collective timeout
    (``TORCH_FR_DUMP_TEMP_FILE``, or its older name ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, is
    a path prefix; torch writes ``<prefix><rank>`` but creates no directory)."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if prefix:
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
