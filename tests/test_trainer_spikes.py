"""The loss-spike guard: a spike made by real data (a batch of wrong labels in a train.npz)
is refused, the run goes back to its newest checkpoint and skips that data, on two
processes under torchrun, and ends where a run told to skip the same data from the start
ends."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from test_trainer import ENV, final_weights, metrics, run, start, torchrun, wait_for
from worker_kill import kill_a_worker

from trainer.checkpoints.sharded import read_commit, step_dir
from trainer.data import GlobalOrder, synthetic_images
from trainer.exit_codes import LOSS_SPIKES
from trainer.flags import parse_args
from trainer.spikes import SPIKE_DEFAULTS, Skip, Spike, SpikeGuard, rollback_skips

SAMPLES, GLOBAL_BATCH, SEED = 2048, 32, 1234
STEPS_PER_EPOCH = SAMPLES // GLOBAL_BATCH
# At the guard's defaults (judging from step 20 on, a spike beyond 6 deviations): the wrong
# labels of a trained model's batch lie far above the loss's recent level.
GUARD = ["--spike-guard"]
ARGS = ["trainer", "--max-steps", "120", "--checkpoint-every", "20", "--batch-size", "16", "--log-every", "10"]
SPIKE_STEP = 90
"""Epoch 1, samples 800-832 of its order: after the checkpoint of step 80, at sample 512."""
SKIPPED = "1:512-832"


def poisoned(data: Path, *steps: int, share: slice = slice(None)) -> Path:
    """A train.npz of learnable images whose labels are wrong (shifted by one class) for the
    samples that an uninterrupted run trains on at ``steps`` (their ``share`` of each step's)."""
    dataset = synthetic_images(SAMPLES, SEED)
    labels = dataset.labels.numpy().copy()
    order = GlobalOrder(SAMPLES, GLOBAL_BATCH, SEED)
    for step in steps:
        epoch, index = divmod(step - 1, STEPS_PER_EPOCH)
        samples = order.permutation(epoch)[index * GLOBAL_BATCH : (index + 1) * GLOBAL_BATCH][share].numpy()
        labels[samples] = (labels[samples] + 1) % 10
    data.mkdir()
    np.savez(data / "train.npz", images=dataset.images.numpy(), labels=labels)
    return data


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def same_statistics(a: Path, b: Path) -> bool:
    """Whether the final checkpoints of two runs hold the same running statistics of the loss:
    the rolled-back run's, taken from its checkpoint, are those of a run that never saw the spike."""
    stats = [read_commit(step_dir(out / "checkpoints", 120))["loss_spikes"] for out in (a, b)]
    return all(stats[0][key] == stats[1][key] for key in ("level", "deviation", "first", "seen"))


@pytest.fixture(scope="module")
def skipped_from_the_start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of a run told with --skip-samples to skip what the guard skips."""
    tmp = tmp_path_factory.mktemp("told")
    data = poisoned(tmp / "data", SPIKE_STEP)
    told = run(
        torchrun(*ARGS, *GUARD, "--data-dir", str(data), "--skip-samples", SKIPPED, "--output-dir", str(tmp / "o"))
    )
    assert told.returncode == 0, told.stderr
    assert "loss spike" not in told.stdout
    return tmp / "o"


def test_a_spike_rolls_back_skips_its_data_and_ends_as_a_run_told_to_skip_it(
    tmp_path: Path, skipped_from_the_start: Path
) -> None:
    data = poisoned(tmp_path / "data", SPIKE_STEP)
    out = tmp_path / "guarded"
    guarded = run(torchrun(*ARGS, *GUARD, "--data-dir", str(data), "--output-dir", str(out)))
    assert guarded.returncode == 0, guarded.stderr
    assert f"loss spike at step {SPIKE_STEP}: loss " in guarded.stdout
    assert f"rolled back to step 80 and skipping samples {SKIPPED} (--skip-samples form), rollback 1 of 3" in (
        guarded.stdout
    )
    record = read_commit(step_dir(out / "checkpoints", 120))
    assert record["loss_spikes"]["rollbacks"] == 1 and record["loss_spikes"]["skipped"] == [SKIPPED]
    assert [r["step"] for r in metrics(out)] == list(range(10, 121, 10))
    assert same(final_weights(out), final_weights(skipped_from_the_start))
    assert same_statistics(out, skipped_from_the_start)


def test_a_spike_in_one_rank_s_data_rolls_back_every_rank(tmp_path: Path) -> None:
    # Only rank 1's half of the step's batch is wrong: rank 0's own loss is ordinary, rank 1's
    # alone is a spike; only judging the mean over the ranks (half the spike's rise, still far
    # beyond the threshold) lets both decide alike, else they part ways in the collectives.
    data = poisoned(tmp_path / "data", SPIKE_STEP, share=slice(GLOBAL_BATCH // 2, None))
    cmd = torchrun(*ARGS, *GUARD, "--timeout-s", "60", "--data-dir", str(data))
    cmd += ["--output-dir", str(tmp_path / "o")]
    guarded = run(cmd)
    assert guarded.returncode == 0, guarded.stderr
    assert f"loss spike at step {SPIKE_STEP}: loss " in guarded.stdout
    assert guarded.stdout.count("rolled back to step 80 and skipping samples") == 1


def test_a_run_killed_after_a_rollback_resumes_bit_identical(tmp_path: Path, skipped_from_the_start: Path) -> None:
    data = poisoned(tmp_path / "data", SPIKE_STEP)
    out = tmp_path / "killed"
    # Step 100's checkpoint is written only after the rollback from step 90.
    cmd = torchrun(*ARGS, *GUARD, "--data-dir", str(data), "--output-dir", str(out), restarts=1)
    status, log = kill_a_worker(cmd, step_dir(out / "checkpoints", 100))
    assert status == 0, log
    assert log.count("rolled back to step 80") == 1 and "resumed from step-000000100" in log
    assert read_commit(step_dir(out / "checkpoints", 120))["loss_spikes"]["skipped"] == [SKIPPED]
    assert same(final_weights(out), final_weights(skipped_from_the_start))
    assert same_statistics(out, skipped_from_the_start)


def test_a_spike_past_the_rollback_budget_stops_the_run_in_one_line(tmp_path: Path) -> None:
    # The second wrong batch (epoch 1, samples 1024-1056) comes at step 87 after the skip. A
    # non-finite loss at step 30 is the non-finite guard's: it neither trips the spike guard
    # nor blinds it.
    data = poisoned(tmp_path / "data", SPIKE_STEP, SPIKE_STEP + 7)
    env = {**ENV, "TRAINER_FAULT_NONFINITE_STEPS": "30"}
    cmd = torchrun(*ARGS, *GUARD, "--spike-max-rollbacks", "1", "--data-dir", str(data), launcher="trainer.launch")
    stopped = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path / "o")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert stopped.returncode == LOSS_SPIKES, stopped.stderr
    assert stopped.stdout.count("rolled back to step 80") == 1
    lines = [line for line in stopped.stderr.splitlines() if line.startswith("error: loss spike at step 87")]
    assert len(lines) == 2, stopped.stderr  # one per rank
    assert "after 1 rollback(s) (--spike-max-rollbacks 1); stopping without a checkpoint or final model" in lines[0]
    assert not (tmp_path / "o" / "final_model.pt").exists()
    assert metrics(tmp_path / "o")[2]["nonfinite_steps"] == 1


def guard(**kwargs) -> SpikeGuard:
    return SpikeGuard(enabled=True, threshold=3.0, warmup=5, max_rollbacks=1, **kwargs)


def test_a_nonfinite_loss_neither_trips_the_guard_nor_blinds_it() -> None:
    spikes = guard()
    losses = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95]
    for step, loss in enumerate(losses, 1):
        assert spikes.observe(step, 0, step * 32, loss) is None
    assert spikes.observe(7, 0, 224, math.nan) is None and spikes.observe(8, 0, 256, math.inf) is None
    assert math.isfinite(spikes.level) and spikes.seen == len(losses)
    spike = spikes.observe(9, 0, 288, 4.0)
    assert isinstance(spike, Spike) and spike.z > 3 and spike.stop == 288


CURVES = json.loads((Path(__file__).parent / "fixtures" / "loss_curves.json").read_text())
MODELS = ("gpt", "llama", "cnn")


def at_defaults() -> SpikeGuard:
    return SpikeGuard(True, SPIKE_DEFAULTS["threshold"], SPIKE_DEFAULTS["warmup"], SPIKE_DEFAULTS["max_rollbacks"])


def first_spike(losses: list[float]) -> Spike | None:
    guard = at_defaults()
    return next((s for step, loss in enumerate(losses, 1) if (s := guard.observe(step, 0, step, loss))), None)


@pytest.mark.parametrize("model", MODELS)
def test_a_normal_descending_curve_never_trips_the_guard_at_its_defaults(model: str) -> None:
    assert first_spike(CURVES[model]) is None


@pytest.mark.parametrize("model", ["gpt", "llama"])
@pytest.mark.parametrize("step", [21, 30, 60, 150, 250])
@pytest.mark.parametrize("jump", [2.0, 3.0])
def test_a_loss_that_jumps_to_twice_its_level_trips_the_guard_from_the_end_of_the_warm_up(
    model: str, step: int, jump: float
) -> None:
    # The token models' curves fall from about 8.3 to 3.4 (gpt) and 4.3 (llama) over 300 steps;
    # at step 21 they are still falling fastest.
    losses = list(CURVES[model])
    losses[step - 1] *= jump
    spike = first_spike(losses)
    assert spike is not None and spike.step == step and spike.loss == losses[step - 1]


@pytest.mark.parametrize("step", [25, 100, 150, 250])
def test_a_convnet_s_spike_is_measured_against_its_first_loss_near_zero(step: int) -> None:
    # The cnn's loss falls from 2.3 towards 0.005: late in the run a fivefold jump is a wobble of
    # a few hundredths, below the floor's 6 × 1% of 2.3, while a rise by its first loss is a spike.
    # (Between steps 30 and 55 it falls by 0.1 to 0.3 a step, and the deviation with it.)
    losses = CURVES["cnn"]
    assert first_spike([*losses[:249], losses[249] * 5, *losses[250:]]) is None
    risen = [*losses[: step - 1], losses[step - 1] + losses[0], *losses[step:]]
    spike = first_spike(risen)
    assert spike is not None and spike.step == step


def test_warmup_and_the_floor_keep_a_flat_loss_from_tripping_on_a_wobble() -> None:
    spikes = guard()
    assert spikes.observe(1, 0, 32, 2.0) is None
    assert spikes.observe(2, 0, 64, 100.0) is None  # inside the warm-up
    flat = guard()
    for step in range(1, 10):
        flat.observe(step, 0, step * 32, 2.0)
    # The deviation is 0; within 3 floors (1% of the first loss each) is no spike, beyond is.
    assert flat.observe(10, 0, 320, 2.05) is None
    assert flat.observe(11, 0, 352, 2.07) is not None


@pytest.mark.parametrize(
    ("epoch", "position", "spike", "extra", "expected"),
    [
        (1, 512, (1, 832), 0, [Skip(1, 512, 832)]),
        (1, 512, (1, 832), 2, [Skip(1, 512, 896)]),
        # Extra steps past the epoch's end go on into the next epoch.
        (0, 1984, (0, 2048), 1, [Skip(0, 1984, 2048), Skip(1, 0, 32)]),
        (0, 1920, (1, 64), 0, [Skip(0, 1920, 2048), Skip(1, 0, 64)]),
        # A checkpoint at the end of an epoch skips nothing of it.
        (0, 2048, (1, 64), 0, [Skip(1, 0, 64)]),
    ],
)
def test_a_rollback_skips_from_the_checkpoint_through_the_spike(epoch, position, spike, extra, expected) -> None:
    found = Spike(step=0, epoch=spike[0], stop=spike[1], loss=9.0, level=1.0, z=8.0)
    assert rollback_skips(epoch, position, found, SAMPLES, GLOBAL_BATCH, extra) == expected


def test_the_guard_state_round_trips_through_a_commit_record() -> None:
    spikes = guard()
    for step, loss in enumerate([2.0, 2.1, 1.9, 2.0000000001], 1):
        spikes.observe(step, 0, step * 32, loss)
    spikes.rollbacks, spikes.skipped = 1, [Skip(1, 512, 832), Skip(2, 0, 64)]
    restored = guard()
    restored.restore(json.loads(json.dumps(spikes.state())))
    assert restored == spikes


@pytest.mark.parametrize(
    ("args", "clip"),
    [
        ([], None),
        (["--model", "gpt"], 1.0),
        (["--model", "llama"], 1.0),
        (["--model", "gpt", "--clip-grad", "0"], None),
    ],
)
def test_the_gpt_family_clips_gradients_to_one_by_default(args: list[str], clip: float | None) -> None:
    assert parse_args(args).grad_clip == clip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--skip-samples", "1:832-512"], "argument --skip-samples: '1:832-512': give EPOCH:START-STOP"),
        (["--spike-max-rollbacks", "-1"], "--spike-max-rollbacks must not be negative, got -1"),
        (["--spike-threshold", "0"], "--spike-threshold must be positive, got 0.0"),
        (["--clip-grad", "-1"], "--clip-grad must not be negative, got -1.0"),
    ],
)
def test_bad_guard_flags_are_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = run([sys.executable, "-m", "trainer", *args, "--output-dir", str(tmp_path)])
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_resume_that_clips_otherwise_than_its_checkpoint_says_so(tmp_path: Path) -> None:
    out = tmp_path / "o"
    gpt = [sys.executable, "-m", "trainer", "--model", "gpt", "--batch-size", "4", "--synthetic-size", "400"]
    gpt += ["--log-every", "6", "--checkpoint-every", "6", "--output-dir", str(out)]
    assert run([*gpt, "--clip-grad", "0", "--max-steps", "6"]).returncode == 0
    resumed = run([*gpt, "--max-steps", "12"])
    assert resumed.returncode == 0, resumed.stderr
    warning = "was trained with no gradient clipping, this run uses gradient clipping to 1: pass --clip-grad 0"
    assert f"warning: step-000000006 {warning}" in resumed.stderr
    # An earlier trainer recorded only --clip-grad, whose absence meant no clipping.
    marker = step_dir(out / "checkpoints", 12) / "commit.json"
    record = json.loads(marker.read_text())
    del record["grad_clip"]
    record["config"]["clip_grad"] = None
    marker.write_text(json.dumps(record))
    upgraded = run([*gpt, "--max-steps", "18"])
    assert upgraded.returncode == 0 and f"warning: step-000000012 {warning}" in upgraded.stderr
    same_clip = run([*gpt, "--max-steps", "24"])
    assert same_clip.returncode == 0 and "gradient clipping" not in same_clip.stderr


def test_a_spike_before_any_checkpoint_stops_the_run_in_one_line(tmp_path: Path) -> None:
    data = poisoned(tmp_path / "data", SPIKE_STEP)
    cmd = [sys.executable, "-m", *ARGS, *GUARD, "--batch-size", "32", "--checkpoint-every", "1000"]
    stopped = run([*cmd, "--data-dir", str(data), "--output-dir", str(tmp_path / "o")])
    assert stopped.returncode == LOSS_SPIKES, stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: loss spike at step {SPIKE_STEP}: loss ")
    assert errors[0].endswith(
        "and no committed checkpoint to go back to: checkpoint sooner (--checkpoint-every) or judge later "
        "(--spike-warmup)"
    )


def test_a_run_stopped_by_a_spike_commits_the_save_still_being_written(tmp_path: Path) -> None:
    # The async save of step 89, just before the spike, is of sound weights: stopping must not drop it.
    data = poisoned(tmp_path / "data", SPIKE_STEP)
    cmd = [sys.executable, "-m", *ARGS, *GUARD, "--batch-size", "32", "--checkpoint-every", "89", "--async-checkpoint"]
    cmd += ["--spike-max-rollbacks", "0", "--data-dir", str(data), "--output-dir", str(tmp_path / "o")]
    stopped = run(cmd)
    assert stopped.returncode == LOSS_SPIKES, stopped.stderr
    assert f"error: loss spike at step {SPIKE_STEP}: loss " in stopped.stderr
    assert read_commit(step_dir(tmp_path / "o" / "checkpoints", 89)) is not None


def test_a_rollback_after_start_fresh_goes_back_only_to_the_run_s_own_checkpoints(tmp_path: Path) -> None:
    # An earlier run (lineage A) of the same model and data left step 100, damaged, and step 110,
    # whose commit.json this run's start does not see (as a lagging NFS view, or storage that
    # could not be read, hides it). With --start-fresh the new run moves 100 aside and trains
    # from step 0; once step 110's marker shows up, the spike at step 90 must still take the
    # run back to its own step 80, not to the other run's step 110, which also loads.
    data = poisoned(tmp_path / "data", SPIKE_STEP)
    out = tmp_path / "o"
    single = [sys.executable, "-m", *ARGS, "--batch-size", "32", "--data-dir", str(data), "--output-dir", str(out)]
    earlier = run([*single, "--max-steps", "110", "--checkpoint-every", "10"])
    assert earlier.returncode == 0, earlier.stderr
    root = out / "checkpoints"
    for older in (p for p in root.glob("step-*") if p.name not in ("step-000000100", "step-000000110")):
        shutil.rmtree(older)
    shard = next((root / "step-000000100").glob("*.distcp"))
    shard.write_bytes(b"\0" + shard.read_bytes()[1:])
    marker, hidden = root / "step-000000110" / "commit.json", tmp_path / "commit-110.json"
    marker.rename(hidden)
    (out / "metrics.jsonl").unlink()
    # 100 steps end in epoch 1: the wrong labels skipped at step 90 come round again in epoch 2.
    launcher = start([*single, *GUARD, "--start-fresh", "--max-steps", "100", "--checkpoint-every", "20"])
    try:
        wait_for(lambda: read_commit(step_dir(root, 20)) is not None)
        hidden.rename(marker)
        log, _ = launcher.communicate(timeout=240)
    finally:
        launcher.kill()
    assert launcher.returncode == 0, log
    assert f"rolled back to step 80 and skipping samples {SKIPPED}" in log, log
    assert read_commit(step_dir(root, 100))["lineage"] != read_commit(step_dir(root, 110))["lineage"]
    # Its own checkpoints stay its own: a run carried into the other lineage would keep them as another run's.
    others = [line for line in log.splitlines() if "a checkpoint of another run" in line]
    assert others and all("step-000000110" in line for line in others), log
