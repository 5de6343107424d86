"""One timed training loop per process: the bundled trainer, a bare loop, or the
tutorial-style DDP loop of the PyTorch/Kubeflow MNIST examples.

    python -m bench.loops --kind trainer --steps 300
    torchrun --standalone --nproc-per-node=2 -m bench.loops --kind tutorial --steps 300

Rank 0 prints one JSON line: kind, processes, threads, steps, seconds, samples/s. Every
side uses the same convnet, per-process batch (64), Adam at lr 1e-3, synthetic data and
intra-op threads. The tutorial side is the examples' code as written (their ``Net``,
per-sample loading, ``torch.optim.Adam``); the bare loop is the trainer's model and
optimizer (``MnistCNN``, channels_last, fused AdamW) without anything around the step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from trainer.config import Config
from trainer.data import ImageDataset, synthetic_images
from trainer.loop import Trainer
from trainer.models import MnistCNN
from trainer.models.spec import model_spec
from trainer.parallelism.topology import topology

SAMPLES = 60_000
SEED = 1234


def bare(data: ImageDataset, steps: int, batch: int) -> None:
    """The trainer's model, memory format and optimizer, stepping on batches prepared in
    advance: the ceiling for what surrounds the step."""
    model = MnistCNN().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, fused=True)
    batches = [data.batch(torch.arange(i * batch, (i + 1) * batch)) for i in range(8)]
    batches = [(x.contiguous(memory_format=torch.channels_last), y) for x, y in batches]
    for step in range(steps):
        x, y = batches[step % len(batches)]
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class TutorialNet(nn.Module):
    """The examples' ``Net`` as they write it: the reference the trainer is measured against."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class PerSampleMnist(Dataset):
    """What the tutorials' torchvision MNIST + ToTensor + Normalize does, sample by sample."""

    def __init__(self, data: ImageDataset):
        self.images, self.labels = data.images, data.labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].float().div(255.0)
        return (x - 0.1307) / 0.3081, int(self.labels[i])


def tutorial(data: ImageDataset, steps: int, batch: int) -> None:
    """The PyTorch/Kubeflow MNIST examples' loop: DataLoader + DistributedSampler, Adam, NLL
    over log-softmax."""
    distributed = dist.is_initialized()
    dataset = PerSampleMnist(data)
    sampler = DistributedSampler(dataset, seed=SEED) if distributed else None
    loader = DataLoader(dataset, batch_size=batch, sampler=sampler, shuffle=sampler is None)
    model = TutorialNet()
    if distributed:
        model = DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    step = 0
    while step < steps:
        for x, y in loader:
            opt.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            if step == steps:
                return


def trainer(steps: int, batch: int, data: ImageDataset) -> Callable[[], None]:
    """The bundled trainer with checkpoints every 200 steps and logging every 20."""
    out = tempfile.mkdtemp(prefix="bench-trainer-")
    cfg = Config(model="cnn", output_dir=out, batch_size=batch, max_steps=steps, checkpoint_every=200, log_every=20)
    run = Trainer(cfg, topology(), data, model_spec(cfg))
    return lambda: run.train()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=("trainer", "bare", "tutorial"), required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        dist.init_process_group("gloo")
    if "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(SEED)
    data = synthetic_images(SAMPLES, SEED)
    if args.kind == "trainer":
        loop = trainer(args.steps, args.batch_size, data)
    elif args.kind == "bare":
        loop = lambda: bare(data, args.steps, args.batch_size)  # noqa: E731
    else:
        loop = lambda: tutorial(data, args.steps, args.batch_size)  # noqa: E731
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet  # the trainer's own log lines
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        loop()
        if world > 1:
            dist.barrier()
        seconds = time.perf_counter() - start
        sys.stdout = stdout
    if int(os.environ.get("RANK", 0)) == 0:
        print(
            json.dumps(
                {
                    "kind": args.kind,
                    "processes": world,
                    "threads": torch.get_num_threads(),
                    "steps": args.steps,
                    "seconds": round(seconds, 3),
                    "samples_per_s": round(args.steps * args.batch_size * world / seconds, 1),
                }
            )
        )
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
