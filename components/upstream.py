"""The pinned upstream sources the platform installs: preparing their local copies, and
what the platform does to them, for checking against the real thing::

    python -m components.upstream prepare                      # once, from a machine that reaches GitHub
    python -m components.upstream prepare --from DIR|URL       # or from a mirror of .upstream/
    python -m components.upstream pack out/upstream            # archives for a mirror served over HTTPS
    python -m components.upstream operator --stack prod        # the operator objects Pulumi applies
    python -m components.upstream volcano-values --stack prod > values.json
    helm template volcano .upstream/volcano-v1.12.1-chart -f values.json
    python -m components.upstream trainer-v2-values --stack prod > values.json
    helm template kubeflow-trainer .upstream/kubeflow-trainer-v2.3.0 -f values.json
    python -m components.upstream kueue-values --stack prod > values.json
    helm template kueue .upstream/kueue-v0.19.2-chart -f values.json
    python -m components.upstream images --stack prod          # what to copy into imageMirror

Exit status: 0 done, 2 invalid stack, input or local copy.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from .config import ConfigError, PlatformSpec, load_spec
from .local_sources import UPSTREAM_DIR, LocalSources, SourceError
from .manifests import (
    customized_operator_objects,
    kueue_values,
    mirrored,
    system_node_selector,
    third_party_images,
    trainer_v2_images,
    trainer_v2_values,
    volcano_values,
)
from .plan import PlanError, find_project_dir, read_stack_file, stack_path
from .prepare import GITHUB, pack, prepare


def load_stack(stack: str) -> PlatformSpec:
    """The validated spec of ``stacks/Pulumi.<stack>.yaml`` (credentials not needed)."""
    return load_spec(read_stack_file(stack_path(find_project_dir(), stack)), credentials=False)


def operator_objects(spec: PlatformSpec, root: Path) -> list[dict]:
    """The operator objects the stack applies, from the verified rendering in ``root``.

    Raises:
        SourceError: the rendering is missing or is not the pinned one.
    """
    rendered = LocalSources(root).operator_objects(spec.operator.version)
    return customized_operator_objects(
        rendered, spec.operator, mirror=spec.image_mirror, node_selector=system_node_selector(spec.cluster)
    )


def image_copies(spec: PlatformSpec) -> list[tuple[str, str]]:
    """(upstream image, mirrored image) for every third-party image the stack pulls.

    Raises:
        ValueError: the stack sets no ``imageMirror``, or names an operator release whose
            image is not known here.
    """
    if spec.image_mirror is None:
        raise ValueError("the stack sets no imageMirror: its images are pulled from their own registries")
    images = third_party_images(
        operator_version=spec.operator.version if spec.operator.install else None,
        volcano_version=spec.operator.volcano.version
        if spec.operator.install and spec.operator.volcano.enabled
        else None,
    )
    if spec.installs_trainer_v2:
        images += trainer_v2_images(spec.trainer_v2)
    return [(image, mirrored(image, spec.image_mirror)) for image in images]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.upstream", description=__doc__.split("\n\n")[0])
    commands = ["prepare", "pack", "operator", "volcano-values", "trainer-v2-values", "kueue-values", "images"]
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
        if args.what == "operator":
            print(yaml.safe_dump_all(operator_objects(spec, root), sort_keys=False), end="")
        elif args.what == "volcano-values":
            values = volcano_values(mirror=spec.image_mirror, node_selector=system_node_selector(spec.cluster))
            print(json.dumps(values, indent=2))
        elif args.what == "trainer-v2-values":
            values = trainer_v2_values(
                spec.trainer_v2, mirror=spec.image_mirror, node_selector=system_node_selector(spec.cluster)
            )
            print(json.dumps(values, indent=2))
        elif args.what == "kueue-values":
            values = kueue_values(
                spec.trainer_v2.kueue, mirror=spec.image_mirror, node_selector=system_node_selector(spec.cluster)
            )
            print(json.dumps(values, indent=2))
        else:
            for source, target in image_copies(spec):
                print(f"{source} {target}")
    except (ConfigError, PlanError, SourceError, ValueError, yaml.YAMLError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
