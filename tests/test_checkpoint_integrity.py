"""What a writer of the output volume who does not hold the job's key can do to checkpoints,
through the trainer's command line: swap a shard between its check and its parse, plant a
``.metadata`` that would poison the process that reads it, and hand ``torch.load`` records
unlike those the trainer writes."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import ROOT
from test_checkpoint_safety import frame, redigest, stack_global, text
from test_trainer import SMALL, final_weights, run, torchrun
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

from trainer.checkpoints import sharded as checkpoints
from trainer.checkpoints.integrity import TAMPERED, TamperedCheckpoint
from trainer.checkpoints.resume import Agreement
from trainer.checkpoints.sharded import CheckpointError, list_checkpoints, read_commit, read_metadata

ONE = [sys.executable, "-m", "trainer", *SMALL]
TWO = ["trainer", *SMALL, "--checkpoint-every", "2"]


def record(checkpoint: Path, fqn: str) -> tuple[Path, _StorageInfo]:
    """The shard file holding ``fqn`` and where in it its record lies."""
    info = next(v for k, v in read_metadata(checkpoint).storage_data.items() if k.fqn == fqn)
    return checkpoint / info.relative_path, info


def tensor_bytes_at(archive: bytes) -> int:
    """Where the tensor data of a ``torch.save`` archive starts: past its member's local header."""
    member = next(m for m in zipfile.ZipFile(io.BytesIO(archive)).infolist() if m.filename.endswith("/data/0"))
    name_length, extra_length = struct.unpack_from("<HH", archive, member.header_offset + 26)
    return member.header_offset + 30 + name_length + extra_length


def test_a_shard_swapped_after_its_check_is_not_what_the_resumed_run_loads(tmp_path: Path) -> None:
    key = tmp_path / "job.key"
    key.write_bytes(os.urandom(32))
    out = tmp_path / "out"
    args = [*ONE, "--checkpoint-key-file", str(key), "--checkpoint-every", "2"]
    first = run([*args, "--max-steps", "2", "--output-dir", str(out)])
    assert first.returncode == 0, first.stderr
    clean = Path(shutil.copytree(out, tmp_path / "clean"))
    untouched = run([*args, "--max-steps", "4", "--output-dir", str(clean)])
    assert untouched.returncode == 0 and "resumed from step-000000002" in untouched.stdout, untouched.stderr

    # The attacker's shard: the same file with fc1.weight all 7.0, so every offset still holds.
    checkpoint = list_checkpoints(out / "checkpoints")[-1]
    shard, info = record(checkpoint, "model.fc1.weight")
    forged = bytearray(shard.read_bytes())
    start = info.offset + tensor_bytes_at(bytes(forged[info.offset : info.offset + info.length]))
    weight = final_weights(clean)["fc1.weight"]
    forged[start : start + weight.numel() * 4] = torch.full_like(weight, 7.0).numpy().tobytes()
    replacement = tmp_path / "forged.distcp"
    replacement.write_bytes(bytes(forged))
    attacker = subprocess.Popen(
        [sys.executable, "tests/swap_watcher.py", str(shard), str(replacement)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert attacker.stdout.readline() == "watching\n"
        resumed = run([*args, "--max-steps", "4", "--output-dir", str(out)])
        assert attacker.wait(timeout=60) == 0 and attacker.stdout.read() == "swapped\n"
    finally:
        attacker.kill()
    # The shard was swapped while the run resumed, right after the run opened it to check it.
    assert shard.read_bytes() == bytes(forged)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000002" in resumed.stdout
    weights, expected = final_weights(out), final_weights(clean)
    assert all(torch.equal(weights[name], expected[name]) for name in expected)


def poisoning_metadata() -> bytes:
    """A ``.metadata`` any loader refuses (it holds an enum member, not metadata), built so that
    on the way it sets the state of torch's own ``_MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT``:
    its value becomes 7, which every checkpoint the process writes afterwards records, and
    which no fresh process can read back."""
    member = stack_global("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING") + b"(K\x00tR"
    return frame(member + b"N}" + text("_value_") + b"K\x07s\x86b")


def test_a_refused_metadata_leaves_torchs_own_objects_as_they_were(tmp_path: Path) -> None:
    member = _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT
    before = dict(vars(member))
    (tmp_path / ".metadata").write_bytes(poisoning_metadata())
    try:
        with pytest.raises(
            CheckpointError, match="setting the state of a _MEM_FORMAT_ENCODING, which the metadata did"
        ):
            read_metadata(tmp_path)
        assert vars(member) == before and member.value == 0
    finally:
        vars(member).clear()
        vars(member).update(before)


def test_a_metadata_changed_after_the_ranks_agreed_on_it_stops_the_run_rather_than_fall_back(
    tmp_path: Path,
) -> None:
    key = tmp_path / "job.key"
    key.write_bytes(os.urandom(32))
    out = tmp_path / "out"
    first = run(
        [
            *ONE,
            "--checkpoint-key-file",
            str(key),
            "--checkpoint-every",
            "2",
            "--max-steps",
            "4",
            "--output-dir",
            str(out),
        ]
    )
    assert first.returncode == 0, first.stderr
    root = out / "checkpoints"
    newest = list_checkpoints(root)[-1]
    entries = read_metadata(newest).state_dict_metadata
    state = {fqn: torch.empty(tuple(e.size), dtype=e.properties.dtype) for fqn, e in entries.items()}

    def load(path: Path, commit: dict) -> None:
        if path == newest:
            # The writer's change lands once every rank has checked the record, before DCP reads .metadata.
            (path / ".metadata").write_bytes((path / ".metadata").read_bytes() + b"\0")
        checkpoints.load(state, path, commit, None)

    with pytest.raises(TamperedCheckpoint, match=r"step-000000004/\.metadata does not match its sha256"):
        Agreement(None, True, 0.0, key.read_bytes()).resume(root, load)


def agree_on(rank: int, roots: list[str], key: bytes, results: str) -> None:
    """One of two ranks settling on a checkpoint, each seeing the checkpoints under its own root."""
    dist.init_process_group("gloo", init_method=f"file://{results}/store", rank=rank, world_size=2)
    try:

        def load(path: Path, commit: dict) -> None:
            (Path(results) / f"loaded-{rank}.json").write_text(json.dumps([path.name, commit["step"]]))

        Agreement(dist.group.WORLD, rank == 0, 0.0, key).resume(Path(roots[rank]), load)
    finally:
        dist.destroy_process_group()


def test_ranks_that_read_different_signed_records_of_a_checkpoint_do_not_load_it(tmp_path: Path) -> None:
    key = tmp_path / "job.key"
    key.write_bytes(os.urandom(32))
    out = tmp_path / "out"
    first = run(
        [
            *ONE,
            "--checkpoint-key-file",
            str(key),
            "--checkpoint-every",
            "2",
            "--max-steps",
            "4",
            "--output-dir",
            str(out),
        ]
    )
    assert first.returncode == 0, first.stderr
    root = out / "checkpoints"
    # What rank 1 reads: by then step-000000004 is the signed step-000000002, renamed in.
    other = Path(shutil.copytree(root, tmp_path / "other"))
    shutil.rmtree(other / "step-000000004")
    shutil.copytree(root / "step-000000002", other / "step-000000004")
    torch.multiprocessing.spawn(agree_on, args=([str(root), str(other)], key.read_bytes(), str(tmp_path)), nprocs=2)
    loaded = [json.loads((tmp_path / f"loaded-{rank}.json").read_text()) for rank in range(2)]
    assert loaded == [["step-000000002", 2], ["step-000000002", 2]]


@pytest.fixture(scope="module")
def four_steps(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A two-process run's output directory with checkpoints at steps 2 and 4, and the flags
    (its key, when signed) that its later runs share."""
    root = tmp_path_factory.mktemp(request.param)
    flags = []
    if request.param == "signed":
        (root / "job.key").write_bytes(os.urandom(32))
        flags = ["--checkpoint-key-file", str(root / "job.key")]
    first = run(torchrun(*TWO, *flags, "--max-steps", "4", "--output-dir", str(root / "out")))
    assert first.returncode == 0, first.stderr
    return root / "out", flags


@pytest.mark.parametrize(
    ("four_steps", "record_kind"),
    [("signed", "with digests"), ("unsigned", "with digests"), ("unsigned", "of an earlier trainer")],
    indirect=["four_steps"],
)
def test_a_poisoning_metadata_never_reaches_the_checkpoints_the_run_goes_on_to_write(
    four_steps: tuple[Path, list[str]], tmp_path: Path, record_kind: str
) -> None:
    saved, flags = four_steps
    out = Path(shutil.copytree(saved, tmp_path / "out"))
    root = out / "checkpoints"
    newest = root / "step-000000004"
    (newest / ".metadata").write_bytes(poisoning_metadata())
    if record_kind != "with digests":
        record = read_commit(newest)
        del record["files"]
        (newest / "commit.json").write_text(json.dumps(record))

    def resume(steps: int, *more: str) -> subprocess.CompletedProcess:
        launched = torchrun(
            *TWO, *flags, *more, "--max-steps", str(steps), "--output-dir", str(out), launcher="trainer.launch"
        )
        return run(launched)

    if flags:
        # Signed: tampering. Every rank stops with one line, and the checkpoint stays as found.
        stopped = resume(6)
        assert stopped.returncode == TAMPERED, stopped.stdout + stopped.stderr
        errors = [line for line in stopped.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 2 and "Traceback" not in stopped.stderr, stopped.stderr
        assert f"{newest.name}/.metadata does not match its sha256 in commit.json" in stopped.stderr
        assert "signed with this job's key, so someone without the key changed it" in stopped.stderr
        assert "resumed from" not in stopped.stdout and "--start-fresh" in errors[0]
        assert (newest / ".metadata").read_bytes() == poisoning_metadata()
        assert [p.name for p in list_checkpoints(root)] == ["step-000000002", newest.name]
        resumed = resume(6, "--start-fresh")
    else:
        resumed = resume(6)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000002" in resumed.stdout
    if record_kind == "with digests":
        assert f"moved {newest} to {root / 'corrupt' / newest.name}: " in resumed.stderr
        assert (root / "corrupt" / newest.name / ".metadata").read_bytes() == poisoning_metadata()
    else:
        assert "setting the state of a _MEM_FORMAT_ENCODING" in resumed.stderr

    # A fresh process resumes the newest checkpoint the run wrote after meeting the poison.
    fresh = resume(8)
    assert fresh.returncode == 0, fresh.stderr
    assert "resumed from step-000000006" in fresh.stdout and "skipping" not in fresh.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("saved")
    result = run([*ONE, "--max-steps", "2", "--output-dir", str(out)])
    assert result.returncode == 0, result.stderr
    return out


def replace_record(checkpoint: Path, fqn: str, archive: bytes) -> None:
    """What a writer of the volume can do to an unsigned checkpoint: ``fqn``'s record replaced,
    its shard laid out anew, and the metadata and the record's digests rewritten to match."""
    metadata = read_metadata(checkpoint)
    shard, _ = record(checkpoint, fqn)
    old = shard.read_bytes()
    body = bytearray()
    for index, info in sorted(metadata.storage_data.items(), key=lambda item: item[1].offset):
        if info.relative_path == shard.name:
            piece = archive if index.fqn == fqn else old[info.offset : info.offset + info.length]
            metadata.storage_data[index] = _StorageInfo(shard.name, len(body), len(piece))
            body += piece
    shard.write_bytes(bytes(body))
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata, protocol=4))
    redigest(checkpoint)


def saved_tensor(tensor: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return buffer.getvalue()


def deflated(archive: bytes) -> bytes:
    """The same ``torch.save`` archive with every member deflated, which ``torch.load`` reads."""
    source, buffer = zipfile.ZipFile(io.BytesIO(archive)), io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for member in source.infolist():
            target.writestr(member.filename, source.read(member), compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("archive", "refusal"),
    [
        # 8 MiB of zeros in 8 KiB: what a small file can ask torch.load to allocate.
        (lambda: deflated(saved_tensor(torch.zeros(2**21))), "archive/data.pkl is compressed (zip method 8)"),
        (lambda: saved_tensor(torch.zeros(512)), "holds 2048 bytes of tensor data, the metadata's chunk 512"),
    ],
    ids=["deflated", "larger than its chunk"],
)
def test_a_tensor_record_unlike_the_trainers_is_refused_before_torch_load(
    saved: Path, tmp_path: Path, archive, refusal
) -> None:
    out = Path(shutil.copytree(saved, tmp_path / "out"))
    checkpoint = list_checkpoints(out / "checkpoints")[-1]
    # fc1.bias holds 128 floats (512 bytes): torch.load would read the record whole, and DCP
    # then narrow it to the 128 the checkpoint asks for, so the run would go on.
    replace_record(checkpoint, "model.fc1.bias", archive())
    resumed = run([*ONE, "--max-steps", "3", "--output-dir", str(out)], timeout=300)
    assert resumed.returncode == 2, resumed.stderr
    assert f"{checkpoint.name}: loading failed" in resumed.stderr and refusal in resumed.stderr
    assert "the record of model.fc1.bias" in resumed.stderr
    assert "no committed checkpoint of this run loads" in resumed.stderr and "resumed from" not in resumed.stdout
