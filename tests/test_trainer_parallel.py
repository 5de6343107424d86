"""FSDP2 as multi-node jobs run it: HSDP across nodes, activation checkpointing."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from test_trainer import final_weights, metrics, one_process_pods, run, torchrun

GPT = ["--model", "gpt", "--batch-size", "4", "--synthetic-size", "200", "--log-every", "3", "--checkpoint-every", "6"]


def test_a_two_node_fsdp_job_shards_within_nodes_and_resumes_on_one_node(tmp_path: Path) -> None:
    # Two pods of one process each, as the operator launches them: two nodes, so HSDP with
    # two replicas of one shard. Its checkpoint then resumes as plain FSDP on one node.
    cmd = [sys.executable, "-m", "trainer", *GPT, "--fsdp", "--max-steps", "6", "--output-dir", str(tmp_path)]
    pods = one_process_pods(cmd)
    outputs = [pod.communicate(timeout=180) for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], outputs
    assert "training gpt on 2 process(es) (HSDP, 2 replicas × 1 shards)" in outputs[0][0]
    resumed = run(torchrun("trainer", *GPT, "--fsdp", "--max-steps", "9", "--output-dir", str(tmp_path)))
    assert resumed.returncode == 0, resumed.stderr
    assert "(FSDP)" in resumed.stdout and "resumed from step-000000006" in resumed.stdout
    rows = metrics(tmp_path)
    assert [r["step"] for r in rows] == [3, 6, 9] and rows[-1]["loss"] < rows[0]["loss"]


def test_activation_checkpointing_recomputes_the_same_gradients(tmp_path: Path) -> None:
    common = [sys.executable, "-m", "trainer", *GPT, "--max-steps", "3"]
    plain = run([*common, "--output-dir", str(tmp_path / "plain")])
    recomputed = run([*common, "--activation-checkpointing", "--output-dir", str(tmp_path / "recomputed")])
    assert plain.returncode == recomputed.returncode == 0, plain.stderr + recomputed.stderr
    a, b = final_weights(tmp_path / "plain"), final_weights(tmp_path / "recomputed")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_sharded_gpt_starts_from_the_weights_a_whole_one_does(tmp_path: Path) -> None:
    # FSDP builds the GPT on the meta device and draws each rank's shards from the same
    # whole tensors a DDP run draws. After one AdamW step, which moves no weight by more
    # than the learning rate, the two runs' weights lie within two learning rates of each
    # other; shards drawn any other way would be off by the init's spread (0.02).
    lr = 1e-4
    args = [*GPT, "--max-steps", "1", "--lr", str(lr)]
    sharded = run(torchrun("trainer", *args, "--fsdp", "--output-dir", str(tmp_path / "fsdp")))
    whole = run(torchrun("trainer", *args, "--output-dir", str(tmp_path / "ddp")))
    assert sharded.returncode == whole.returncode == 0, sharded.stderr + whole.stderr
    a, b = final_weights(tmp_path / "fsdp"), final_weights(tmp_path / "ddp")
    assert a.keys() == b.keys()
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 2 * lr
    assert all(torch.equal(w["head.weight"], w["tok.weight"]) for w in (a, b))  # still tied


def test_the_survivors_of_a_lost_pod_exit_to_be_retried(tmp_path: Path) -> None:
    # Two pods of one process each, as the operator launches them; the second pod's process
    # is killed mid-training (its node lost). The first fails in a collective and must exit
    # with the status restartPolicy: ExitCode retries, not 1, which would end the job.
    cmd = [sys.executable, "-m", "trainer", *GPT, "--max-steps", "100000", "--output-dir", str(tmp_path)]
    pods = one_process_pods(cmd)
    try:
        # Once rank 0 has logged a step, both are in the training loop.
        for line in pods[0].stdout:
            if line.startswith("step="):
                break
        pods[1].kill()
        _, err = pods[0].communicate(timeout=180)
    finally:
        for pod in pods:
            pod.kill()
    assert pods[0].returncode == 203, err
    assert "error: lost the other processes (" in err
