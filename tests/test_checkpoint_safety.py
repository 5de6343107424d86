"""Loading a checkpoint runs nothing its bytes ask for, and a changed file is refused.

The attacks write what someone with write access to the output volume could: a crafted
``.metadata`` pickle, or metadata of allowed classes that routes an entry to attacker
bytes. Each payload touches a marker file, so the tests see whether it ran.
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import pickletools
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_trainer import ENV, SMALL, run, torchrun
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata, MetadataIndex

from trainer.checkpoints.integrity import TAMPERED, file_digests, sign
from trainer.checkpoints.sharded import (
    Checkpointer,
    CheckpointError,
    list_checkpoints,
    read_commit,
    read_metadata,
    verify,
)
from trainer.checkpoints.verified_read import TensorOnlyLoadPlanner


def one_process(out: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "trainer", "--max-steps", str(steps), "--output-dir", str(out), *SMALL]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of a finished two-step run, copied for each test that changes it."""
    out = tmp_path_factory.mktemp("saved")
    result = run(one_process(out, 2))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def output(saved: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "out", symlinks=True))


def frame(*ops: bytes) -> bytes:
    """A protocol-4 pickle from hand-written opcodes."""
    return b"\x80\x04" + b"".join(ops) + b"."


def text(value: str) -> bytes:
    raw = value.encode()
    return b"\x8c" + bytes([len(raw)]) + raw  # SHORT_BINUNICODE


def stack_global(module: str, name: str) -> bytes:
    return text(module) + text(name) + b"\x93"  # STACK_GLOBAL


def call(module: str, name: str, *args: str) -> bytes:
    """``module.name(*args)`` as opcodes: the global, a tuple of strings, REDUCE."""
    return stack_global(module, name) + b"(" + b"".join(text(a) for a in args) + b"t" + b"R"


def redigest(checkpoint: Path) -> None:
    """Record the checkpoint's files as they are now, as whoever can write an unsigned
    checkpoint can: the attack then reaches the loader, past the digests."""
    record = read_commit(checkpoint)
    (checkpoint / "commit.json").write_text(json.dumps({**record, "files": file_digests(checkpoint)}))


def test_a_dotted_name_inside_the_metadata_module_does_not_run(output: Path) -> None:
    # The metadata module imports os, and protocol 4 resolves "os.system" inside it.
    marker = output / "ran"
    checkpoint = list_checkpoints(output / "checkpoints")[-1]
    payload = frame(call("torch.distributed.checkpoint.metadata", "os.system", f"touch {marker}"))
    assert [op.name for op, _, _ in pickletools.genops(payload)][-2:] == ["REDUCE", "STOP"]
    (checkpoint / ".metadata").write_bytes(payload)
    redigest(checkpoint)

    with pytest.raises(CheckpointError) as refused:
        read_metadata(checkpoint)
    assert not marker.exists()
    assert "os.system is not allowed" in str(refused.value)

    resumed = run(one_process(output, 3))
    assert not marker.exists()
    # The run's only committed checkpoint does not load: it stops rather than start over.
    assert resumed.returncode == 2, resumed.stderr
    assert f"skipping checkpoint {checkpoint}" in resumed.stderr and "os.system is not allowed" in resumed.stderr
    assert "no committed checkpoint of this run loads" in resumed.stderr


def bytes_entry_metadata(checkpoint: Path, fqn: str, payload_file: str, length: int) -> Metadata:
    """The checkpoint's own metadata with ``fqn`` declared a byte entry stored in ``payload_file``."""
    metadata = read_metadata(checkpoint)
    metadata.state_dict_metadata[fqn] = BytesStorageMetadata()
    metadata.storage_data = {k: v for k, v in metadata.storage_data.items() if k.fqn != fqn}
    metadata.storage_data[MetadataIndex(fqn)] = _StorageInfo(relative_path=payload_file, offset=0, length=length)
    return metadata


class Touch:
    """Unpickles as a call of ``os.system``: what a shard's bytes can ask for."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant_byte_entry(output: Path, marker: Path) -> Path:
    """The newest checkpoint of ``output``, its metadata now declaring ``rng`` as bytes held in a
    shard whose bytes are a pickle that touches ``marker`` when loaded."""
    checkpoint = list_checkpoints(output / "checkpoints")[-1]
    payload = pickle.dumps(Touch(marker), protocol=4)
    (checkpoint / "__0_9.distcp").write_bytes(payload)
    metadata = bytes_entry_metadata(checkpoint, "rng", "__0_9.distcp", len(payload))
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata, protocol=4))
    redigest(checkpoint)
    return checkpoint


def test_a_byte_entry_in_metadata_of_allowed_classes_does_not_run(output: Path) -> None:
    # Only checkpoint metadata classes: the unpickler lets it through, and DCP's default
    # planner would hand the entry's bytes to torch.load(weights_only=False).
    marker = output / "ran"
    checkpoint = plant_byte_entry(output, marker)

    resumed = run(one_process(output, 3))
    assert not marker.exists()
    assert resumed.returncode == 2, resumed.stderr
    refusal = "BytesStorageMetadata is not allowed in checkpoint metadata"
    assert f"skipping checkpoint {checkpoint}" in resumed.stderr and refusal in resumed.stderr
    with pytest.raises(CheckpointError, match=refusal):
        read_metadata(checkpoint)


def test_the_load_planner_refuses_byte_entries_on_its_own(output: Path) -> None:
    # DCP's plain reader unpickles this metadata (its classes are DCP's own); the planner
    # alone must keep the entry's bytes from torch.load.
    marker = output / "ran"
    checkpoint = plant_byte_entry(output, marker)
    state = {"rng": torch.get_rng_state()}
    with pytest.raises(CheckpointException, match="rng is stored as bytes"):
        dcp.load(state, storage_reader=FileSystemReader(checkpoint), planner=TensorOnlyLoadPlanner(), no_dist=True)
    assert not marker.exists()


# The fuzzing: every global an attacker could name, around a sentinel that records calls.
CALLS: list[tuple] = []


def sentinel(*args, **kwargs):
    CALLS.append((args, kwargs))
    return Metadata(state_dict_metadata={})


SENTINEL_MODULE = "checkpoint_fuzz_sentinel"
MODULES = [
    SENTINEL_MODULE,
    "torch.distributed.checkpoint.metadata",
    "torch.distributed.checkpoint.filesystem",
    "torch",
    "torch.serialization",
    "pathlib",
    "builtins",
    "os",
]
NAMES = [
    "sentinel",
    "Metadata.sentinel",
    "Metadata",
    "MetadataIndex",
    "TensorStorageMetadata",
    "BytesStorageMetadata",
    "ChunkStorageMetadata",
    "TensorProperties",
    "StorageMeta",
    "_MEM_FORMAT_ENCODING",
    "_StorageInfo",
    "Size",
    "float32",
    "_get_layout",
    "PosixPath",
    "torch.sentinel",
    "os.sentinel",
    "eval",
    "getattr",
]


@pytest.fixture(autouse=True)
def reachable_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the sentinel wherever a name could resolve to it: its own module, the allowed
    modules' namespaces, an allowed class, and the modules those namespaces import."""
    module = type(sys)(SENTINEL_MODULE)
    module.sentinel = sentinel
    monkeypatch.setitem(sys.modules, SENTINEL_MODULE, module)
    for target in (dcp_metadata, dcp_metadata.os, dcp_metadata.torch, Metadata, pathlib, pathlib.PosixPath):
        monkeypatch.setattr(target, "sentinel", sentinel, raising=False)
    CALLS.clear()


OPCODES = [b"(", b")", b"t", b"R", b"\x81", b"b", b"N", b"}", b"]", b"e", b"s", b"u", b"0", b"2", b"\x94", b"a"]


@st.composite
def hostile_pickles(draw: st.DrawFn) -> bytes:
    """Protocol-4 opcode streams: globals from the lists above, called (global, argument
    tuple, REDUCE) or left for the opcodes around them to call, build and nest, with
    strings, ints and stray opcodes in between."""
    ops = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["call", "global", "text", "int", "op", "memo"]))
        if kind == "call":
            module, name = draw(st.sampled_from(MODULES)), draw(st.sampled_from(NAMES))
            args = draw(st.lists(st.sampled_from(NAMES + ["x"]), max_size=2))
            ops.append(call(module, name, *args))
        elif kind == "global":
            module, name = draw(st.sampled_from(MODULES)), draw(st.sampled_from(NAMES))
            ops.append(stack_global(module, name) if draw(st.booleans()) else f"c{module}\n{name}\n".encode())
        elif kind == "text":
            ops.append(text(draw(st.sampled_from(NAMES + ["x", ""]))))
        elif kind == "int":
            ops.append(b"J" + struct.pack("<i", draw(st.integers(-(2**31), 2**31 - 1))))
        elif kind == "memo":
            ops.append(b"h" + bytes([draw(st.integers(0, 3))]))
        else:
            ops.append(draw(st.sampled_from(OPCODES)))
    return frame(*ops)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.one_of(hostile_pickles(), st.binary(max_size=200).map(lambda b: b"\x80\x04" + b)))
def test_fuzzed_metadata_never_runs_anything_and_is_refused_cleanly(tmp_path: Path, payload: bytes) -> None:
    (tmp_path / ".metadata").write_bytes(payload)
    try:
        read_metadata(tmp_path)
    except CheckpointError:
        pass
    assert CALLS == []


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (SENTINEL_MODULE, "sentinel"),
        ("torch.distributed.checkpoint.metadata", "sentinel"),
        ("torch.distributed.checkpoint.metadata", "Metadata.sentinel"),
        ("torch.distributed.checkpoint.metadata", "torch.sentinel"),
        ("torch", "sentinel"),
        ("pathlib", "PosixPath.sentinel"),
    ],
)
def test_each_way_of_naming_the_sentinel_is_refused(tmp_path: Path, module: str, name: str) -> None:
    (tmp_path / ".metadata").write_bytes(frame(call(module, name, "x")))
    with pytest.raises(CheckpointError, match="is not allowed"):
        read_metadata(tmp_path)
    assert CALLS == []


def test_the_real_metadata_still_loads(saved: Path) -> None:
    metadata = read_metadata(list_checkpoints(saved / "checkpoints")[-1])
    assert {"model.fc1.weight", "rng"} <= metadata.state_dict_metadata.keys()
    assert all(isinstance(m.size, torch.Size) for m in metadata.state_dict_metadata.values())


def test_a_flipped_shard_of_a_signed_checkpoint_stops_every_rank_naming_the_file(tmp_path: Path) -> None:
    key = tmp_path / "job.key"
    key.write_bytes(os.urandom(32))
    args = ["trainer", "--checkpoint-every", "10", "--checkpoint-key-file", str(key), *SMALL]
    first = run(torchrun(*args, "--max-steps", "10", "--output-dir", str(tmp_path)))
    assert first.returncode == 0, first.stderr
    checkpoint = list_checkpoints(tmp_path / "checkpoints")[-1]
    info = next(v for k, v in read_metadata(checkpoint).storage_data.items() if k.fqn == "model.fc1.weight")
    shard = checkpoint / info.relative_path
    data = bytearray(shard.read_bytes())
    middle = info.offset + info.length // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    shard.write_bytes(bytes(data))
    (tmp_path / "final_model.pt").unlink()

    # The pods' launcher, which passes on the workers' status: 74, which no retry policy retries.
    resumed = run(torchrun(*args, "--max-steps", "20", "--output-dir", str(tmp_path), launcher="trainer.launch"))
    assert resumed.returncode == TAMPERED, resumed.stdout + resumed.stderr
    errors = [line for line in resumed.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "Traceback" not in resumed.stderr, resumed.stderr
    assert all(f"{checkpoint.name}/{info.relative_path} does not match its sha256" in line for line in errors)
    assert "resumed from" not in resumed.stdout
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == [checkpoint.name]
    assert shard.read_bytes() == bytes(data)
    assert not (tmp_path / "final_model.pt").exists()


def test_a_pickle_cannot_set_attributes_on_an_allowed_class(tmp_path: Path) -> None:
    # BUILD with a (None, {name: value}) state on a class object would setattr on the class.
    build_on_class = stack_global("torch.distributed.checkpoint.metadata", "Metadata") + b"N}" + text("x")
    (tmp_path / ".metadata").write_bytes(frame(build_on_class + text("y") + b"s\x86b"))
    with pytest.raises(
        CheckpointError, match="setting the state of class Metadata, which the metadata did not just create"
    ):
        read_metadata(tmp_path)
    assert not hasattr(Metadata, "x")


def rewritten(metadata: Metadata, change) -> Metadata:
    change(metadata)
    return metadata


def first_storage(metadata: Metadata) -> _StorageInfo:
    return next(iter(metadata.storage_data.values()))


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda m: setattr(first_storage(m), "relative_path", "../outside.distcp"), "outside the checkpoint's files"),
        (lambda m: setattr(first_storage(m), "relative_path", "commit.json"), "outside the checkpoint's files"),
        (lambda m: setattr(first_storage(m), "transform_descriptors", ["zstd"]), r"stored through \['zstd'\]"),
        (lambda m: m.state_dict_metadata.update(rng=torch.Size([1])), "rng is a Size, not a tensor"),
        (lambda m: setattr(m, "storage_data", None), "no storage table"),
        (lambda m: setattr(first_storage(m), "length", "9"), "at offset 0, length '9'"),
    ],
)
def test_metadata_naming_anything_but_tensors_in_its_own_files_is_refused(output: Path, change, refusal: str) -> None:
    checkpoint = list_checkpoints(output / "checkpoints")[-1]
    metadata = rewritten(read_metadata(checkpoint), change)
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata, protocol=4))
    with pytest.raises(CheckpointError, match=refusal):
        read_metadata(checkpoint)


def test_a_record_missing_a_digest_is_refused_and_one_of_an_earlier_trainer_resumes(output: Path) -> None:
    checkpoint = list_checkpoints(output / "checkpoints")[-1]
    record = json.loads((checkpoint / "commit.json").read_text())
    assert set(record["files"]) == {".metadata", "__0_0.distcp"}
    assert verify(checkpoint) == record
    partial = {".metadata": record["files"][".metadata"]}
    (checkpoint / "commit.json").write_text(json.dumps({**record, "files": partial}))
    with pytest.raises(CheckpointError, match="__0_0.distcp has no digest in commit.json"):
        verify(checkpoint)
    (checkpoint / "commit.json").write_text(json.dumps({**record, "files": ["__0_0.distcp"]}))
    with pytest.raises(CheckpointError, match="'files' is not a table of file digests"):
        verify(checkpoint)

    del record["files"]
    (checkpoint / "commit.json").write_text(json.dumps(record))
    resumed = run(one_process(output, 3))
    assert resumed.returncode == 0, resumed.stderr
    assert f"checkpoint {checkpoint} has no file digests (an earlier trainer): loading it unchecked" in resumed.stderr
    assert f"resumed from {checkpoint.name}" in resumed.stdout


def test_a_state_with_anything_but_tensors_is_not_saved(tmp_path: Path) -> None:
    checkpointer = Checkpointer(tmp_path, group=None, is_main=True, keep=1, async_save=False)
    state = {"model": {"w": torch.zeros(2)}, "data": {"epoch": 3}}
    with pytest.raises(TypeError, match=r"non-tensors at data\.epoch"):
        checkpointer.save(state, {"step": 1, "reason": "final"}, wait=True)
    assert list_checkpoints(tmp_path) == []


def test_with_a_key_only_records_the_job_signed_are_resumed(tmp_path: Path) -> None:
    own, other = tmp_path / "own.key", tmp_path / "other.key"
    own.write_bytes(os.urandom(32))
    other.write_bytes(os.urandom(32))
    out = tmp_path / "out"
    env = {**ENV, "CHECKPOINT_KEY_FILE": str(own)}
    first = subprocess.run(one_process(out, 2), cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stderr
    checkpoint = list_checkpoints(out / "checkpoints")[-1]
    record = read_commit(checkpoint)
    assert record["hmac"] == sign(record, own.read_bytes())
    assert verify(checkpoint, own.read_bytes()) == record
    with pytest.raises(CheckpointError, match="not signed with this job's --checkpoint-key-file"):
        verify(checkpoint, other.read_bytes())
    (checkpoint / "commit.json").write_text(json.dumps({**record, "position": 0}))
    with pytest.raises(CheckpointError, match="not signed"):
        verify(checkpoint, own.read_bytes())
    (checkpoint / "commit.json").write_text(json.dumps(record))

    # Another job writing into this output directory: its checkpoint is not this job's, and
    # that job stops rather than train from step 0 beside it, unless told to start fresh.
    before = {p.name: read_commit(p) for p in list_checkpoints(out / "checkpoints")}
    stopped = run(one_process(out, 3) + ["--checkpoint-key-file", str(other)])
    assert stopped.returncode == 2, stopped.stderr
    assert (
        f"error: no committed checkpoint of this run loads ({checkpoint.name}: commit.json is not signed"
        in stopped.stderr
    )
    assert "--start-fresh" in stopped.stderr and "training" not in stopped.stdout
    assert {p.name: read_commit(p) for p in list_checkpoints(out / "checkpoints")} == before
    foreign = run(one_process(out, 3) + ["--checkpoint-key-file", str(other), "--start-fresh"])
    assert foreign.returncode == 0, foreign.stderr
    assert f"skipping checkpoint {checkpoint}: commit.json is not signed" in foreign.stderr
    resumed = run(one_process(out, 4) + ["--checkpoint-key-file", str(own)])
    assert resumed.returncode == 0, resumed.stderr
    assert "skipping checkpoint" in resumed.stderr and "step-000000003: commit.json is not signed" in resumed.stderr
    assert f"resumed from {checkpoint.name}" in resumed.stdout


def test_an_empty_key_file_is_refused_before_training(tmp_path: Path) -> None:
    (tmp_path / "empty.key").write_bytes(b"\n")
    result = run(one_process(tmp_path / "out", 2) + ["--checkpoint-key-file", str(tmp_path / "empty.key")])
    assert result.returncode == 2
    assert f"error: --checkpoint-key-file {tmp_path / 'empty.key'}: empty" in result.stderr
    assert not (tmp_path / "out" / "checkpoints").exists()
