"""arena's habits on ``ack-jobs submit``: its flag names where the platform has the setting,
a clear refusal naming the platform's way where it has not, and the command after ``--``.

People coming from kubeflow/arena bring its ``submit`` flags (its user guide,
``docs.archived/userguide/``, submits with ``--gpus``, ``--workers``, ``--image``, ``--selector``,
``--working-dir``, ``--data-dir``, ``--sync-mode``/``--sync-source``, ``--tensorboard``) and its habit
of giving the command itself after the flags. Its ``--data``/``-d <claim>:<path>`` (arena v0.15.5
``pkg/argsbuilder/submit.go``, "specify the datasource to mount to the job, like
<name_of_datasource>:<mount_point_on_job>", ``setDataSet``; the user guide's
``docs/training/pytorchjob/distributed-data.md`` submits with ``--data pvc_name:container_path``)
is the platform's ``--data`` too. Pure.
"""

from __future__ import annotations

ALIASES = {
    "--workers": "--nodes",
    "--priority": "--priority-class",
    "--retry": "--backoff-limit",
    "--selector": "--node-selector",
    "--working-dir": "--code-path",
    "-d": "--data",
}
"""arena's name → the platform's flag that sets the same thing."""

REFUSED = {
    "--data-dir": "jobs mount the stack's data volume read-only at /mnt/data; read your data under it",
    "--logdir": "the trainer writes TensorBoard events to /mnt/output/<job>/tensorboard, which the stack's "
    "TensorBoard shows (its output tensorboard): drop --logdir, and write your own code's events there",
    "--tensorboard": "the stack runs TensorBoard over every job's /mnt/output/<job>/tensorboard: drop --tensorboard",
    "--sync-mode": "code comes from a git commit with --git-url and --commit, or a folder with --code-path",
    "--sync-source": "code comes from a git commit with --git-url and --commit, or a folder with --code-path",
}
"""arena's flags the platform has no equivalent for, each with what to do instead."""

LAUNCHERS = ("torchrun", "accelerate", "deepspeed")
PYTHON = ("python", "python3")


class TailError(ValueError):
    """The command after ``--`` cannot run as given; the message says how it can."""


def tail_command(tail: list[str], launcher: str | None = None) -> tuple[str, list[str]] | None:
    """The launcher and command an arena-style tail (``-- python train.py --lr 1``) runs as, or
    ``None`` for flags of the bundled trainer (``-- --grad-accum 4``).

    ``python``/``python3`` and a ``.py`` script start under ``launcher`` (``--launcher``), else
    under torchrun, one process per GPU, as a distributed PyTorch job must; the interpreter's name
    is dropped, as every launcher starts Python itself. ``torchrun``, ``accelerate`` (or
    ``accelerate launch``) or ``deepspeed`` first names the launcher, whose world (nodes,
    processes) the platform sets.

    Raises:
        TailError: the tail names a launcher's own options, another launcher than ``--launcher``,
            interpreter options a launcher would not pass on, or (without ``--launcher``) a
            program no launcher runs.
    """
    if not tail or tail[0].startswith("-"):
        return None
    first, rest = tail[0], tail[1:]
    if first in PYTHON:
        if not rest:
            raise TailError("--: python needs the script (or -m MODULE) to run")
        chosen = launcher or "torchrun"
        if chosen != "python" and rest[0].startswith("-") and rest[0] != "-m":
            # torchrun, accelerate launch and deepspeed's torchrun start the interpreter themselves.
            raise TailError(
                f"--: {chosen} starts Python itself, so {first}'s option {rest[0]} would reach {chosen} instead: "
                "drop it, and set what it sets with --env (PYTHONUNBUFFERED=1 for -u)"
            )
        return chosen, rest
    if first in LAUNCHERS:
        if launcher not in (None, first):
            raise TailError(f"--: the command starts with {first} but --launcher is {launcher}: keep one of them")
        if first == "accelerate" and rest[:1] == ["launch"]:
            rest = rest[1:]
        if not rest or rest[0].startswith("-") and rest[0] != "-m":
            raise TailError(
                f"--: the platform gives {first} the job's world (--nodes, --procs-per-node): write "
                f"`-- {first} train.py ...`, with no {first} options"
            )
        return first, rest
    if launcher is not None:
        return launcher, tail
    if first.endswith(".py"):
        return "torchrun", tail
    raise TailError(
        f"--: {first!r} is not a Python program: give the script after -- (-- python train.py ...), with "
        "--launcher python, torchrun, accelerate or deepspeed to choose how it starts"
    )
