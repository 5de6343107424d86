"""Fine-tuning: a run started from a saved final model (``--init-from`` / ``$MODEL_PATH``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from test_trainer import ENV, final_weights, metrics, run, torchrun

GPT = ["--model", "gpt", "--batch-size", "4", "--synthetic-size", "400", "--log-every", "1"]


def test_a_run_starts_from_a_saved_final_model(tmp_path: Path) -> None:
    safetensors = pytest.importorskip("safetensors.torch")
    pretrained = tmp_path / "pretrained"
    first = run([sys.executable, "-m", "trainer", *GPT, "--max-steps", "30", "--output-dir", str(pretrained)])
    assert first.returncode == 0, first.stderr
    weights = final_weights(pretrained)
    exported = safetensors.load_file(pretrained / "final_model.safetensors")
    assert exported.keys() == weights.keys() and all(torch.equal(exported[k], weights[k]) for k in weights)

    # A PyTorchJob names the weights to start from in $MODEL_PATH and the final model's
    # destination in $FINAL_MODEL_PATH; sharded (FSDP) across two processes here.
    env = {**ENV, "MODEL_PATH": str(pretrained / "final_model.pt"), "FINAL_MODEL_PATH": str(tmp_path / "tuned.pt")}
    tuned = tmp_path / "tuned"
    cmd = torchrun("trainer", *GPT, "--fsdp", "--max-steps", "2", "--output-dir", str(tuned))
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert f"initialised from {pretrained / 'final_model.pt'}" in result.stdout
    fresh = run(torchrun("trainer", *GPT, "--fsdp", "--max-steps", "2", "--output-dir", str(tmp_path / "fresh")))
    assert fresh.returncode == 0, fresh.stderr
    # The first step's loss is that of the weights it starts from.
    start, scratch = metrics(tuned)[0]["loss"], metrics(tmp_path / "fresh")[0]["loss"]
    assert start < metrics(pretrained)[0]["loss"] - 0.5 and start < scratch - 0.5
    assert (tmp_path / "tuned.pt").is_file() and not (tuned / "final_model.pt").exists()

    from_safetensors = tmp_path / "from-safetensors"
    # One process with the two processes' global batch: the same samples, the same loss.
    again = [*GPT, "--batch-size", "8", "--max-steps", "1", "--output-dir", str(from_safetensors)]
    again += ["--init-from", str(pretrained / "final_model.safetensors")]
    result = run([sys.executable, "-m", "trainer", *again])
    assert result.returncode == 0, result.stderr
    assert metrics(from_safetensors)[0]["loss"] == pytest.approx(start, rel=1e-4)


def test_weights_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    missing = run([sys.executable, "-m", "trainer", "--init-from", str(tmp_path / "none.pt")])
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        == f"error: --init-from {tmp_path / 'none.pt'}: no such file (pretrained weights to start from)"
    )
    cnn = tmp_path / "cnn.pt"
    torch.save({"conv1.weight": torch.zeros(32, 1, 3, 3)}, cnn)
    wrong = run([sys.executable, "-m", "trainer", *GPT, "--init-from", str(cnn), "--output-dir", str(tmp_path / "o")])
    assert wrong.returncode == 2 and f"error: --init-from {cnn}: does not fit --model gpt" in wrong.stderr
    code = tmp_path / "code.pt"
    torch.save({"weights": torch.zeros(1), "hook": print}, code)
    unsafe = run([sys.executable, "-m", "trainer", "--init-from", str(code), "--output-dir", str(tmp_path / "u")])
    assert unsafe.returncode == 2 and f"error: --init-from {code}: not a state_dict of tensors" in unsafe.stderr
