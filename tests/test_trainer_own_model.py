"""A model of the job's own code in the bundled trainer (``--model package.module:factory``):
it trains, checkpoints, resumes and reports as the built-in models do, and a factory that
breaks the contract stops the run with one line and exit status 2.

The factories live in ``tests/job_code/own_models/``, importable only through ``PYTHONPATH``,
as a job's ``code`` volume or checkout is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from test_trainer import ENV, final_weights, metrics, torchrun
from worker_kill import kill_a_worker

JOB_CODE = ROOT / "tests" / "job_code"
CODE_ENV = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(JOB_CODE), ENV.get("PYTHONPATH")]))}
MIXER = [
    *("--model", "own_models.mixer:factory", "--parallel", "fsdp"),
    *("--batch-size", "4", "--synthetic-size", "400", "--checkpoint-every", "8", "--log-every", "4"),
    *("--max-steps", "24", "--peak-tflops", "1"),
]


def run(cmd: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=CODE_ENV, capture_output=True, text=True, timeout=timeout)


def test_a_factory_of_the_jobs_code_trains_sharded_and_resumes_bit_identical_after_a_sigkill(tmp_path: Path) -> None:
    reference = run(torchrun("trainer", *MIXER, "--output-dir", str(tmp_path / "reference")))
    assert reference.returncode == 0, reference.stderr
    assert "training own_models.mixer:factory on 2 process(es) (FSDP)" in reference.stdout
    rows = metrics(tmp_path / "reference")
    assert rows[-1]["loss"] < rows[0]["loss"] and rows[-1]["tokens_per_s"] > 0
    assert rows[-1]["mfu"] > 0, "the factory's flops_per_token gives MFU"

    out = tmp_path / "killed"
    cmd = torchrun("trainer", *MIXER, "--output-dir", str(out), restarts=1)
    status, log = kill_a_worker(cmd, out / "checkpoints" / "step-000000008", env=CODE_ENV)
    assert status == 0, log
    assert "resumed from step-0000000" in log
    resumed, expected = final_weights(out), final_weights(tmp_path / "reference")
    assert resumed.keys() == expected.keys() and {"embed.weight", "blocks.1.mix.weight"} <= set(expected)
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)


FACTORY = "a function that takes the trainer's Config and returns a trainer.models.spec.ModelSpec (docs/trainer.md)"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "own_models.absent:factory",
            "--model own_models.absent:factory: cannot import own_models.absent (ModuleNotFoundError: No module "
            "named 'own_models.absent'); the module must be importable from the job's code (the working "
            "directory or PYTHONPATH)",
        ),
        (
            "own_models.broken:missing",
            f"--model own_models.broken:missing: own_models.broken has no 'missing'; expected {FACTORY}",
        ),
        (
            "own_models.broken:not_a_function",
            "--model own_models.broken:not_a_function: not_a_function is not callable (its type is int); "
            f"expected {FACTORY}",
        ),
        (
            "own_models.broken:returns_a_module",
            "--model own_models.broken:returns_a_module: the factory returned a Linear, not a "
            "trainer.models.spec.ModelSpec (docs/trainer.md)",
        ),
        (
            "own_models.broken:builds_a_string",
            "--model own_models.broken:builds_a_string: build returned a str, not a torch.nn.Module",
        ),
        (
            "own_models.broken:tokens_without_length",
            "--model own_models.broken:tokens_without_length: the factory's ModelSpec has token inputs without a "
            "positive seq_len and vocab_size (got None and 256)",
        ),
        (
            "own_models.broken:raises",
            "--model own_models.broken:raises: the factory raised ValueError: no such width: 7",
        ),
        (
            "own_models/broken.py",
            "--model 'own_models/broken.py': choose cnn, gpt or llama, or name your own model's factory as "
            "package.module:factory (importable from the job's code)",
        ),
    ],
)
def test_a_factory_that_breaks_the_contract_stops_with_one_line_and_status_2(
    tmp_path: Path, model: str, message: str
) -> None:
    result = run([sys.executable, "-m", "trainer", "--model", model, "--output-dir", str(tmp_path)], timeout=60)
    assert (result.returncode, result.stderr) == (2, f"error: {message}\n")


def test_a_model_without_blocks_cannot_be_sharded_and_the_pods_launcher_keeps_status_2(tmp_path: Path) -> None:
    # Found once the model is built, after the process group is up: every rank stops alike, and
    # the pods' launcher passes the status on, so restartPolicy ExitCode does not retry it.
    args = [
        "trainer",
        "--model",
        "own_models.broken:has_no_blocks",
        "--parallel",
        "fsdp",
        "--output-dir",
        str(tmp_path),
    ]
    result = run(torchrun(*args, launcher="trainer.launch"), timeout=120)
    assert result.returncode == 2, result.stderr
    assert (
        "error: --model own_models.broken:has_no_blocks: --parallel fsdp needs the model's blocks, an nn.ModuleList "
        "attribute `blocks` (the units FSDP shards and recomputation repeats)"
    ) in result.stderr
    assert "Traceback" not in result.stderr
