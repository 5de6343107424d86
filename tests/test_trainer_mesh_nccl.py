"""Each mesh dimension's NCCL options: the decision as a table, and the options object that
``init_device_mesh`` hands to each dimension's group creation.

No NCCL here (the CPU build of torch has no ``ProcessGroupNCCL``), so the second part runs the
real ``init_device_mesh`` → ``new_group`` → backend-creator path on a backend registered through
torch's plugin API (``Backend.register_backend``, extended API: the creator receives the
group's ``pg_options``), over torch's fake process group in one process (8 ranks' worth of
groups, no communication), with :class:`StandInOptions` in place of ``ProcessGroupNCCL.Options``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore, _create_fake_pg

from trainer.parallelism import wrap as parallel
from trainer.parallelism.mesh import CommSettings, MeshShape, comm_settings
from trainer.parallelism.topology import Topology

TP_REASON = "sequence-parallel all-gathers and reduce-scatters between every block's matmuls, {}: latency-bound and on the critical path"
PP_REASON = "1F1B's activation sends {}: the next stage waits on each micro-batch's"
DP_REASON = "FSDP all-gathers and reduce-scatters {}, bandwidth-bound and overlapping compute"
INSIDE, ACROSS = "inside a node", "across nodes"


@pytest.mark.parametrize(
    ("shape", "local_world", "expected"),
    [
        # One process, or a flat mesh of one rank per dimension: nothing to tune.
        (MeshShape(1, 1, 1), 1, ()),
        # TP 8 on one node.
        (MeshShape(1, 1, 8), 8, (CommSettings("tp", True, TP_REASON.format(INSIDE)),)),
        # TP 16 over two nodes of 8: the group crosses the network.
        (MeshShape(1, 1, 16), 8, (CommSettings("tp", True, TP_REASON.format(ACROSS)),)),
        # A stage per node of 8, FSDP 8 inside each: the sends cross nodes, FSDP stays in one.
        (
            MeshShape(8, 4, 1),
            8,
            (CommSettings("pp", True, PP_REASON.format(ACROSS)), CommSettings("dp", False, DP_REASON.format(INSIDE))),
        ),
        # Two stages on one node of 8.
        (
            MeshShape(1, 2, 4),
            8,
            (CommSettings("tp", True, TP_REASON.format(INSIDE)), CommSettings("pp", True, PP_REASON.format(INSIDE))),
        ),
        # TP 8 in each of two nodes, FSDP across them.
        (
            MeshShape(2, 1, 8),
            8,
            (CommSettings("tp", True, TP_REASON.format(INSIDE)), CommSettings("dp", False, DP_REASON.format(ACROSS))),
        ),
    ],
)
def test_each_dimension_gets_the_options_of_its_role_and_link(
    shape: MeshShape, local_world: int, expected: tuple
) -> None:
    assert comm_settings(shape, local_world) == expected


def test_the_log_line_names_each_option_and_its_reason() -> None:
    tp, dp = comm_settings(MeshShape(2, 1, 8), 8)
    assert tp.describe() == "tp: high-priority stream (" + TP_REASON.format(INSIDE) + ")"
    assert dp.describe() == "dp: normal-priority stream (" + DP_REASON.format(ACROSS) + ")"


class StandInConfig:
    """``ProcessGroupNCCL.NCCLConfig`` as torch 2.13 declares it (``torch/_C/_distributed_c10d.pyi``:
    ``blocking``, ``cga_cluster_size``, ``min_ctas``, ``max_ctas``); slots, so a field the real
    type lacks fails as it would on the pybind object."""

    __slots__ = ("blocking", "cga_cluster_size", "min_ctas", "max_ctas")


class StandInOptions:
    """``ProcessGroupNCCL.Options`` (the same ``.pyi``: ``config``, ``is_high_priority_stream``,
    and ``Backend.Options``'s ``_timeout``), which the CPU build of torch lacks."""

    __slots__ = ("config", "is_high_priority_stream", "_timeout")

    def __init__(self) -> None:
        self.config = StandInConfig()
        self.is_high_priority_stream = False


CREATED: list[tuple[list[int], object, timedelta]] = []


def standin_backend(common: object, options: object) -> object:
    """Record the ranks, options and timeout each group is created with; run on torch's fake group."""
    CREATED.append((list(common.global_ranks_in_group), options, common.timeout))
    return _create_fake_pg(common, None)


@pytest.fixture
def fake_world(monkeypatch: pytest.MonkeyPatch):
    """Rank 5 of 8 on a backend that takes options, as NCCL does."""
    if not hasattr(dist.Backend, "STANDIN"):
        dist.Backend.register_backend("standin", standin_backend, extended_api=True, devices=["cpu"])
    monkeypatch.setitem(parallel.OPTIONS_TYPES, "standin", StandInOptions)
    dist.init_process_group("standin", store=FakeStore(), rank=5, world_size=8)
    CREATED.clear()
    try:
        yield Topology(rank=5, world=8, local_rank=1, local_world=4, device=torch.device("cpu"))
    finally:
        dist.destroy_process_group()


def test_each_dimension_s_group_is_created_with_its_decided_options(fake_world: Topology) -> None:
    # Two nodes of 4: tp 2 inside a node, dp 2 inside a node, pp 2 across; rank 5 is (dp 0, pp 1, tp 1).
    shape = MeshShape(2, 2, 2)
    settings = comm_settings(shape, fake_world.local_world)
    assert [s.dim for s in settings] == ["tp", "pp", "dp"]
    mesh = parallel.split_mesh(shape, fake_world, settings, timedelta(seconds=123))
    created = {tuple(ranks): options for ranks, options, _ in CREATED}
    assert set(created) == {(4, 5), (1, 5), (5, 7)}
    for ranks, dim in (((4, 5), "tp"), ((1, 5), "pp"), ((5, 7), "dp")):
        options = created[ranks]
        decided = next(s for s in settings if s.dim == dim)
        assert isinstance(options, StandInOptions)
        assert options.is_high_priority_stream is decided.high_priority
        assert options._timeout == timedelta(seconds=123)
        assert dist.get_process_group_ranks(mesh[dim].get_group()) == list(ranks)
    # Each group is created with --timeout-s, which a group made without options would not get.
    assert {timeout for _, _, timeout in CREATED} == {timedelta(seconds=123)}


def test_gloo_groups_get_no_options() -> None:
    settings = comm_settings(MeshShape(1, 1, 2), 2)
    assert parallel.mesh_overrides(settings, "gloo", timedelta(seconds=60)) is None
