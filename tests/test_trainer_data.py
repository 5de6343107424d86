"""Token data at scale: uint32 vocabularies with a header, and no recompilation for an
epoch's last, smaller batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from test_trainer import ENV, metrics, run

from trainer.data.tokens import DataError, header, open_tokens, write_tokens

GPT = [sys.executable, "-m", "trainer", "--model", "gpt", "--batch-size", "4", "--log-every", "1"]


def test_uint32_tokens_train_a_model_with_the_files_vocabulary(tmp_path: Path) -> None:
    vocab = 70_000
    tokens = (np.arange(129 * 24, dtype=np.int64) * 7919) % vocab
    write_tokens(tmp_path / "train.bin", tokens, vocab)
    # Read back from the header alone: dtype, count and vocabulary, without a scan.
    mapped, declared = open_tokens(tmp_path / "train.bin")
    assert (mapped.dtype, len(mapped), declared) == (np.uint32, len(tokens), vocab)
    assert int(mapped.max()) > 65535 and np.array_equal(mapped, tokens)
    result = run([*GPT, "--data-dir", str(tmp_path), "--max-steps", "3", "--output-dir", str(tmp_path / "out")])
    assert result.returncode == 0, result.stderr
    assert "24 samples" in result.stdout and len(metrics(tmp_path / "out")) == 3
    import torch

    weights = torch.load(tmp_path / "out" / "final_model.pt", weights_only=True)
    assert weights["tok.weight"].shape[0] == 70_016  # padded to a multiple of 64


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda p: p.write_bytes(p.read_bytes()[:-8]),
            "train.bin: the header declares 3096 uint32 tokens, but the file holds 3094",
        ),
        (lambda p: p.write_bytes(b"\x01\x02\x03"), "train.bin has an odd size"),
    ],
)
def test_malformed_token_files_fail_fast(tmp_path: Path, write, message: str) -> None:
    path = tmp_path / "train.bin"
    write_tokens(path, np.arange(129 * 24) % 70_000, 70_000)
    write(path)
    with pytest.raises(DataError, match=message):
        open_tokens(path)


def test_a_token_beyond_the_models_vocabulary_stops_the_run_with_a_clear_error(tmp_path: Path) -> None:
    tokens = np.zeros(129 * 8, np.uint16)
    tokens[129 * 5 + 3] = 5000  # headerless uint16: the tiny model's vocabulary is 4096
    tokens.tofile(tmp_path / "train.bin")
    result = run([*GPT, "--data-dir", str(tmp_path), "--max-steps", "3", "--output-dir", str(tmp_path / "out")])
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: {tmp_path / 'train.bin'}: token id 5000 at token offset {129 * 5 + 3} (window 5) "
        "is not below the model's vocabulary size 4096"
    )


def test_the_last_smaller_batch_of_an_epoch_is_not_recompiled(tmp_path: Path) -> None:
    # 40 windows in batches of 16: steps of 16, 16 and 8, then the next epoch.
    cmd = [*GPT, "--batch-size", "16", "--synthetic-size", "40", "--compile", "--max-steps", "4"]
    env = {**ENV, "TORCH_LOGS": "recompiles"}
    result = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert [r["epoch"] for r in metrics(tmp_path)] == [0, 0, 0, 1]
    assert "Recompiling" not in result.stderr and "recompil" not in result.stderr.lower(), result.stderr[-3000:]
    assert os.path.getsize(tmp_path / "final_model.pt") > 0


def test_a_negative_token_count_is_a_data_error_of_one_line(tmp_path: Path) -> None:
    # A version-3 header declaring -12 uint16 tokens, in a file 24 bytes short of its header:
    # the sizes add up, so only the count itself tells that the file is damaged.
    raw = bytearray(header(1, 4096, np.uint16))
    raw[16:24] = np.int64(-12).tobytes()
    (tmp_path / "train.bin").write_bytes(bytes(raw[: len(raw) - 24]))
    result = run([*GPT, "--data-dir", str(tmp_path), "--max-steps", "3", "--output-dir", str(tmp_path / "out")])
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: --data-dir {tmp_path}: train.bin: the header declares -12 tokens, a negative count (a damaged file?)"
    ]
