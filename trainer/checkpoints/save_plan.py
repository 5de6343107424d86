"""Which rank saves which tensor, so the state goes to host memory once per job, not once per rank.

An async save first copies whatever it is given to host memory and only then, in the
background, plans the write, where DCP drops the duplicates of replicated tensors
(torch 2.13 ``torch/distributed/checkpoint/state_dict_saver.py`` ``async_save`` stages
before ``_dedup_save_plans.py`` ``dedup_save_plans`` runs). Under DDP every rank holds the
whole model and optimizer, so every rank copied all of it: a node of 8 GPUs held 8 copies
of the same weights. Here each rank is handed only its share before DCP sees it:

- a plain tensor is the same on every rank (DDP keeps parameters and optimizer states in
  step; the step counters and the gathered RNG states are alike everywhere), so each goes
  to one rank, the ranks taking turns by size, so every rank copies and writes about
  ``1/world`` of the bytes;
- a DTensor (FSDP, HSDP) is kept by the ranks of the first replica only: the others hold
  the same shards (a ``Replicate`` mesh dimension) and DCP would keep one of them anyway.

The files are those DCP writes from the whole state, so loading is unchanged and every
rank reads all it needs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor, Replicate


def leaves(state: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(key path, value)`` for every value of nested dicts that is not a dict."""
    found = []
    for key, value in state.items():
        if isinstance(value, dict):
            found += leaves(value, (*prefix, key))
        else:
            found.append(((*prefix, key), value))
    return found


def _first_replica(tensor: DTensor) -> bool:
    coordinate = tensor.device_mesh.get_coordinate() or []
    return all(c == 0 for c, p in zip(coordinate, tensor.placements, strict=True) if isinstance(p, Replicate))


def nbytes(tensor: torch.Tensor) -> int:
    """The bytes of the whole tensor, of every shard together for a DTensor."""
    return tensor.numel() * tensor.element_size()


def share(state: dict[str, Any], rank: int, world: int) -> tuple[dict[str, Any], int]:
    """This rank's part of ``state`` to save, and the bytes of the whole state.

    Every rank computes the same assignment from the same names and sizes, without a
    collective: the largest tensor goes first, each to the rank with the fewest bytes so far.
    """
    plain = sorted(
        ((path, v) for path, v in leaves(state) if not isinstance(v, DTensor)),
        key=lambda item: (-nbytes(item[1]), item[0]),
    )
    load = [0] * world
    owner: dict[tuple[str, ...], int] = {}
    for path, tensor in plain:
        owner[path] = min(range(world), key=load.__getitem__)
        load[owner[path]] += nbytes(tensor)
    mine: dict[str, Any] = {}
    total = 0
    for path, value in leaves(state):
        total += nbytes(value)
        keep = _first_replica(value) if isinstance(value, DTensor) else owner[path] == rank
        if keep:
            node = mine
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
    return mine, total
