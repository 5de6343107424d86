"""The pinned upstream sources the platform installs: preparing their local copies, and
what the platform does to them, for checking against the real thing::

    python -m components.upstream prepare                      # once, from a machine that reaches GitHub
    python -m components.upstream prepare --from DIR|URL       # or from a mirror of .upstream/
    python -m components.upstream pack out/upstream            # archives for a mirror served over HTTPS
    python -m components.upstream operator --stack prod        # the operator objects Pulumi applies
    python -m components.upstream volcano --stack prod          # the Volcano objects Pulumi applies
    python -m components.upstream trainer-v2-values --stack prod > values.json
    helm template kubeflow-trainer .upstream/kubeflow-trainer-v2.3.0 -f values.json
    python -m components.upstream kueue-values --stack prod > values.json
    helm template kueue .upstream/kueue-v0.19.2-chart -f values.json
    python -m components.upstream images --stack prod          # what to copy into imageMirror
    python -m components.upstream lock-images --stack prod     # their digests, into stacks/images.prod.lock.json
    python -m components.upstream verify-images --stack prod   # fails naming each image whose digest changed

Exit status: 0 done, 1 a digest is not the locked one, 2 invalid stack, input, local copy or registry answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from pathlib import Path

import yaml

from ..config import ConfigError, PlatformSpec, load_spec
from ..manifests import (
    customized_operator_objects,
    customized_volcano_objects,
    kueue_values,
    system_node_selector,
    trainer_v2_values,
)
from ..manifests.platform.images import image_copies, stack_images
from .digests import DigestError, changed, lock_path, read_lock, resolve, write_lock
from .fetch import GITHUB, pack, prepare
from .local_sources import UPSTREAM_DIR, LocalSources, SourceError
from .yamlio import StackFileError, find_project_dir, read_stack_file, stack_path

UPSTREAM_TIMEOUT_S = 10
"""How long ``lock-images`` waits on an upstream registry, which a mirrored network may not reach."""


def load_stack(stack: str) -> PlatformSpec:
    """The validated spec of ``stacks/Pulumi.<stack>.yaml`` (credentials not needed)."""
    return load_spec(read_stack_file(stack_path(find_project_dir(), stack)), credentials=False)


def operator_objects(spec: PlatformSpec, root: Path, digests: dict[str, str] | None = None) -> list[dict]:
    """The operator objects the stack applies, from the verified rendering in ``root``, its
    images pinned by the stack's image lock ``digests``.

    Raises:
        SourceError: the rendering is missing or is not the pinned one.
    """
    rendered = LocalSources(root).operator_objects(spec.operator.version)
    return customized_operator_objects(
        rendered,
        spec.operator,
        mirror=spec.image_mirror,
        node_selector=system_node_selector(spec.cluster),
        digests=digests,
    )


def volcano_objects(spec: PlatformSpec, root: Path, digests: dict[str, str] | None = None) -> list[dict]:
    """The Volcano objects the stack applies, from the verified manifest in ``root``, its images
    pinned by the stack's image lock ``digests``.

    Raises:
        SourceError: the manifest is missing or is not the pinned one.
        ValueError: the stack does not enable Volcano.
    """
    volcano = spec.operator.volcano
    if not (spec.operator.install and volcano.enabled):
        raise ValueError("the stack installs no Volcano: set operator.volcano.enabled: true")
    return customized_volcano_objects(
        LocalSources(root).volcano_objects(volcano.version),
        version=volcano.version,
        mirror=spec.image_mirror,
        node_selector=system_node_selector(spec.cluster),
        digests=digests,
    )


NOT_COPIED_YET = (401, 403, 404)
"""What a registry may answer an anonymous client for a repository that does not exist yet: a 404,
or a refusal that does not say whether it exists. ACR does not document which; pulls of a
repository missing from an ACR registry are reported as refused ("pull access denied, repository
does not exist or may require authorization"), not as not found. Taking upstream's digest then is
safe: the cluster pulls by it, and a private repository of that name makes the stack's create of
the public one fail."""


def awaiting_fill(spec: PlatformSpec) -> set[str]:
    """The mirrored images ``pulumi up`` copies (``mirrorFill: subscription`` or ``copy``): every one."""
    return {target for _, target in stack_images(spec)} if spec.mirror_fill != "none" else set()


def lock_images(
    spec: PlatformSpec, lock: Path, *, require_upstream: bool = False, awaiting: Collection[str] | None = None
) -> int:
    """Resolve every image the stack pulls, print ``<upstream> <pulled> <digest>`` and write the lock.

    An image ``pulumi up`` copies (``awaiting``, by default :func:`awaiting_fill`) may
    be missing from the mirror before the ``pulumi up`` that copies it: the mirror answers 404,
    or 401 or 403 (:data:`NOT_COPIED_YET`), and the lock takes upstream's digest. The cluster
    pulls it by that digest, so a copy with any other digest is refused at the pull, never run;
    ``verify-images`` after that ``up`` asks the mirror itself.

    A mirrored image's digest is also asked of its upstream registry, so that the lock does not
    trust the mirror on first use: a mirror serving another digest (a re-pushed or changed copy),
    or an upstream answering with an error (no such tag, credentials, a rate limit, a digest that
    does not match its manifest), writes no lock and returns 1, naming each image. An upstream
    that does not answer at all (no address, no connection, a timeout) is said so on stderr and
    the mirror's digest is taken as it is, unless ``require_upstream``: then it is an error too.
    """
    awaiting = awaiting_fill(spec) if awaiting is None else awaiting
    digests, differ, unchecked, failed, upstream_only = {}, [], [], [], []
    for source, pulled in stack_images(spec):
        try:
            digests[pulled] = resolve(pulled)
        except DigestError as err:
            if pulled not in awaiting or err.status not in NOT_COPIED_YET:
                raise
            try:
                digests[pulled] = resolve(source, timeout=UPSTREAM_TIMEOUT_S)
            except DigestError as up:
                failed.append(f"{pulled} is not copied yet, and upstream {source} could not be checked: {up}")
                continue
            upstream_only.append(pulled)
            print(f"{source} {pulled} {digests[pulled]}")
            continue
        print(f"{source} {pulled} {digests[pulled]}")
        if source == pulled:
            continue
        try:
            upstream = resolve(source, timeout=UPSTREAM_TIMEOUT_S)
        except DigestError as err:
            if not err.unreachable or require_upstream:
                failed.append(f"upstream {source} could not be checked: {err}")
                continue
            unchecked.append(source)
            print(f"note: upstream not reachable, the mirror's digest is not compared: {err}", file=sys.stderr)
            continue
        if upstream != digests[pulled]:
            differ.append(f"{pulled}: the mirror serves {digests[pulled]}, upstream {source} serves {upstream}")
    for problem in differ:
        print(f"error: {problem}: copy it by digest (skopeo copy --all --preserve-digests)", file=sys.stderr)
    for problem in failed:
        print(f"error: {problem}", file=sys.stderr)
    if differ or failed:
        return 1
    mirrored_images = sum(source != pulled for source, pulled in stack_images(spec)) - len(upstream_only)
    if mirrored_images:
        print(f"{mirrored_images - len(unchecked)} of {mirrored_images} mirrored images match upstream")
    if upstream_only:
        print(
            f"{len(upstream_only)} not copied yet, locked at upstream's digest (the subscription copies them in "
            "the next pulumi up; run verify-images after it)"
        )
    write_lock(lock, digests)
    print(f"wrote {lock}")
    return 0


def verify_images(spec: PlatformSpec, lock: Path) -> int:
    """Resolve every image again; 1, naming each image, when a digest is not the locked one."""
    resolved = {pulled: resolve(pulled) for _, pulled in stack_images(spec)}
    problems = changed(read_lock(lock), resolved)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"{len(resolved)} images match {lock}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.upstream", description=__doc__.split("\n\n")[0])
    commands = ["prepare", "pack", "operator", "volcano", "trainer-v2-values", "kueue-values", "images"]
    commands += ["lock-images", "verify-images"]
    parser.add_argument("what", choices=commands)
    parser.add_argument("target", nargs="?", help="pack: the folder to write the archives to")
    parser.add_argument("--stack", help="the stack, stacks/Pulumi.<stack>.yaml (all but prepare and pack)")
    parser.add_argument("--dir", type=Path, help=f"the local copies (default: the project's {UPSTREAM_DIR}/)")
    parser.add_argument(
        "--from",
        dest="mirror",
        help="prepare from a mirror: a folder holding another .upstream/, or an https:// or file:// URL "
        "serving the archives `pack` writes (default: the pinned tags on GitHub)",
    )
    parser.add_argument(
        "--git-base", default=GITHUB, help="where the pinned repositories are (<base>/<owner>/<name>.git)"
    )
    parser.add_argument("--lock", type=Path, help="the image lock (default: stacks/images.<stack>.lock.json)")
    parser.add_argument(
        "--require-upstream",
        action="store_true",
        help="lock-images: fail, naming the image, where an upstream registry cannot be reached "
        "(default: take the mirror's digest there, with a note)",
    )
    args = parser.parse_args(argv)
    root = args.dir or find_project_dir() / UPSTREAM_DIR
    try:
        if args.what == "prepare":
            added = prepare(root, mirror=args.mirror, git_base=args.git_base)
            print(f"{root}: {', '.join(added) if added else 'every pinned copy was there'}; all verified")
            return 0
        if args.what == "pack":
            if not args.target:
                parser.error("pack needs the folder to write to")
            for archive in pack(root, Path(args.target)):
                print(archive)
            return 0
        if not args.stack:
            parser.error(f"{args.what} needs --stack")
        spec = load_stack(args.stack)
        lock = args.lock or lock_path(find_project_dir(), args.stack)
        if args.what == "lock-images":
            return lock_images(spec, lock, require_upstream=args.require_upstream)
        if args.what == "verify-images":
            return verify_images(spec, lock)
        digests = read_lock(lock)
        if args.what == "operator":
            print(yaml.safe_dump_all(operator_objects(spec, root, digests), sort_keys=False), end="")
        elif args.what == "volcano":
            print(yaml.safe_dump_all(volcano_objects(spec, root, digests), sort_keys=False), end="")
        elif args.what == "trainer-v2-values":
            values = trainer_v2_values(
                spec.trainer_v2,
                mirror=spec.image_mirror,
                node_selector=system_node_selector(spec.cluster),
                digests=digests,
            )
            print(json.dumps(values, indent=2))
        elif args.what == "kueue-values":
            values = kueue_values(
                spec.trainer_v2.kueue,
                mirror=spec.image_mirror,
                node_selector=system_node_selector(spec.cluster),
                digests=digests,
            )
            print(json.dumps(values, indent=2))
        else:
            for source, target in image_copies(spec):
                print(f"{source} {target}")
    except (ConfigError, DigestError, StackFileError, SourceError, ValueError, yaml.YAMLError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
