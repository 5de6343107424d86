"""Token corpora: ``prepare`` from raw text, 64-bit headers, and sharded corpora that
index the same way on every rank and after a resume."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_trainer import final_weights, run
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from trainer.data import load_tokens
from trainer.data.tokens import (
    HEADER_BYTES,
    MANIFEST,
    TOKEN_MAGIC,
    DataError,
    header,
    open_corpus,
    open_tokens,
    sha256_file,
    write_manifest,
    write_tokens,
)

WORDS = [f"w{i}" for i in range(300)]


def make_tokenizer(path: Path) -> Tokenizer:
    """A word-level tokenizer trained here on the generated words, with an end-of-text token."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>"]))
    tokenizer.save(str(path))
    return tokenizer


def make_corpus(root: Path) -> list[str]:
    """Generated documents in .txt and .jsonl files; the documents in the order prepare reads them."""
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(WORDS, int(rng.integers(5, 60)))) for _ in range(400)]
    (root / "b").mkdir(parents=True)
    (root / "a.txt").write_text(docs[0])
    (root / "b" / "part.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": d}) + "\n" for i, d in enumerate(docs[1:]))
    )
    return docs


PREPARE = [sys.executable, "-m", "trainer.data", "prepare"]


def test_prepare_tokenizes_text_in_parallel_into_shards_the_trainer_reads(tmp_path: Path) -> None:
    tokenizer = make_tokenizer(tmp_path / "tokenizer.json")
    docs = make_corpus(tmp_path / "raw")
    common = [str(tmp_path / "raw"), "--tokenizer", str(tmp_path / "tokenizer.json"), "--eos", "<eos>"]
    result = run([*PREPARE, *common, "--output", str(tmp_path / "two"), "--workers", "2", "--shard-tokens", "3000"])
    assert result.returncode == 0, result.stderr
    # The bar redraws one line with \r, which universal newlines show as separate lines.
    bars = [line for line in result.stderr.splitlines() if line.startswith("prepare [")]
    assert len(bars) >= 2 and "100%" in bars[-1]
    eos = tokenizer.token_to_id("<eos>")
    expected = np.concatenate([[*tokenizer.encode(d, add_special_tokens=False).ids, eos] for d in docs])
    manifest = json.loads((tmp_path / "two" / MANIFEST).read_text())
    shards = manifest["shards"]
    assert [s["path"] for s in shards] == [f"train-{i:05d}.bin" for i in range(len(shards))] and len(shards) > 2
    assert all(s["tokens"] == 3000 for s in shards[:-1]) and sum(s["tokens"] for s in shards) == len(expected)
    assert all(sha256_file(tmp_path / "two" / s["path"]) == s["sha256"] for s in shards)
    mapped, vocab, _ = open_corpus(tmp_path / "two")
    assert vocab == tokenizer.get_vocab_size() and mapped[0].dtype == np.uint16
    assert np.array_equal(np.concatenate(mapped), expected)
    assert f"wrote {len(expected)} tokens in {len(shards)} shards" in result.stdout
    # One worker writes the same bytes: the order does not depend on the pool.
    single = run([*PREPARE, *common, "--output", str(tmp_path / "one"), "--workers", "1", "--shard-tokens", "3000"])
    assert single.returncode == 0, single.stderr
    assert json.loads((tmp_path / "one" / MANIFEST).read_text()) == manifest


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            lambda raw: (raw / "x.jsonl").write_text('{"text": "w1 w2"}\n{"body": "w3"}\n'),
            [],
            "x.jsonl:2: not a JSON object with a string 'text' (--text-field)",
        ),
        (
            lambda raw: (raw / "x.txt").write_text("w1"),
            ["--eos", "</s>"],
            "--eos '</s>' is not a token of tokenizer.json",
        ),
        (lambda raw: (raw / "x.csv").write_text("w1"), [], "no .txt or .jsonl files under"),
    ],
)
def test_prepare_refuses_bad_input_with_one_line(tmp_path: Path, setup, args: list[str], message: str) -> None:
    make_tokenizer(tmp_path / "tokenizer.json")
    (tmp_path / "raw").mkdir()
    setup(tmp_path / "raw")
    cmd = [
        *PREPARE,
        str(tmp_path / "raw"),
        "--tokenizer",
        str(tmp_path / "tokenizer.json"),
        "--output",
        str(tmp_path / "o"),
    ]
    result = run([*cmd, "--workers", "2", *args])
    assert result.returncode == 2
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and message in error, result.stderr
    assert "Traceback" not in result.stderr


def test_a_header_past_two_to_the_31_tokens_is_read_with_64_bit_counts(tmp_path: Path) -> None:
    count = 2**31 + 5
    path = tmp_path / "train.bin"
    with open(path, "wb") as f:
        f.write(header(count, 50_000, np.uint16))
        # Sparse: only the header and the last few tokens occupy the disk.
        f.seek(HEADER_BYTES + (count - 3) * 2)
        f.write(np.array([11, 12, 13], np.uint16).tobytes())
    tokens, vocab = open_tokens(path)
    assert (len(tokens), vocab, tokens.dtype) == (count, 50_000, np.uint16)
    dataset = load_tokens(tmp_path, 64)
    assert len(dataset) == (count - 1) // 64
    # The last window ends two tokens before the end: offsets past 2**31 are not wrapped.
    x, y = dataset.batch(torch.tensor([len(dataset) - 1]))
    last = (count - 1) // 64 * 64
    assert y[0, -1].item() == int(tokens[last]) and tokens[count - 3 :].tolist() == [11, 12, 13]
    assert x.shape == (1, 64)


def test_llm_c_headers_still_load(tmp_path: Path) -> None:
    ints = np.zeros(256, np.int32)
    ints[:4] = [TOKEN_MAGIC, 2, 5, 70_000]
    (tmp_path / "old.bin").write_bytes(ints.tobytes() + np.array([1, 2, 3, 4, 69_999], np.uint32).tobytes())
    tokens, vocab = open_tokens(tmp_path / "old.bin")
    assert tokens.tolist() == [1, 2, 3, 4, 69_999] and vocab == 70_000


def shards(directory: Path, sizes: list[int], names: list[str]) -> list[np.ndarray]:
    directory.mkdir(exist_ok=True)
    arrays = []
    for i, (size, name) in enumerate(zip(sizes, names, strict=True)):
        arrays.append((np.arange(size) + 1000 * i) % 4096)
        write_tokens(directory / name, arrays[-1], 4096)
    return arrays


def test_shards_are_read_in_the_manifests_order_without_windows_across_shards(tmp_path: Path) -> None:
    names = ["train-00002.bin", "train-00000.bin", "train-00001.bin"]
    arrays = shards(tmp_path, [9 * 8 + 1, 5 * 8 + 4, 3 * 8 + 1], names)
    entries = [
        {"path": n, "tokens": len(a), "sha256": sha256_file(tmp_path / n)} for n, a in zip(names, arrays, strict=True)
    ]
    write_manifest(tmp_path, entries, 4096)
    dataset = load_tokens(tmp_path, 8)
    assert len(dataset) == 9 + 5 + 3
    x, y = dataset.batch(torch.tensor([0, 8, 9, 13, 14, 16]))
    starts = [(0, 0), (0, 64), (1, 0), (1, 32), (2, 0), (2, 16)]
    assert [row.tolist() for row in x] == [arrays[s][o : o + 8].tolist() for s, o in starts]
    assert [row.tolist() for row in y] == [arrays[s][o + 1 : o + 9].tolist() for s, o in starts]
    # Without the manifest, the glob's name order.
    (tmp_path / MANIFEST).unlink()
    x, _ = load_tokens(tmp_path, 8).batch(torch.tensor([0]))
    assert x[0].tolist() == arrays[1][:8].tolist()


def test_a_shard_that_disagrees_with_the_manifest_is_named(tmp_path: Path) -> None:
    shards(tmp_path, [50, 60], ["train-00000.bin", "train-00001.bin"])
    write_manifest(
        tmp_path,
        [
            {"path": "train-00000.bin", "tokens": 50, "sha256": ""},
            {"path": "train-00001.bin", "tokens": 61, "sha256": ""},
        ],
        4096,
    )
    with pytest.raises(DataError, match=f"--data-dir {tmp_path}: train-00001.bin holds 60 tokens, {MANIFEST} says 61"):
        load_tokens(tmp_path, 8)


def test_a_run_on_shards_resumes_at_the_same_sample(tmp_path: Path) -> None:
    data = tmp_path / "data"
    arrays = shards(
        data, [129 * 10 + 1, 129 * 7 + 1, 129 * 9 + 1], ["train-00000.bin", "train-00001.bin", "train-00002.bin"]
    )
    write_manifest(
        data, [{"path": f"train-{i:05d}.bin", "tokens": len(a), "sha256": ""} for i, a in enumerate(arrays)], 4096
    )
    args = [sys.executable, "-m", "trainer", "--model", "gpt", "--batch-size", "4", "--data-dir", str(data)]
    args += ["--checkpoint-every", "3", "--log-every", "1"]
    reference = run([*args, "--max-steps", "6", "--output-dir", str(tmp_path / "reference")])
    assert reference.returncode == 0, reference.stderr
    assert "26 samples" in reference.stdout
    out = str(tmp_path / "resumed")
    assert run([*args, "--max-steps", "3", "--output-dir", out]).returncode == 0
    resumed = run([*args, "--max-steps", "6", "--output-dir", out])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step-000000003" in resumed.stdout
    a, b = final_weights(tmp_path / "reference"), final_weights(tmp_path / "resumed")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
