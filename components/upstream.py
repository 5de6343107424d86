"""What the platform does to the upstream manifests it installs, for checking them against
the real thing where there is network::

    kubectl kustomize "github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4" \\
        | python -m components.upstream operator --stack prod        # the objects Pulumi applies
    python -m components.upstream volcano-values --stack prod > values.json
    helm template volcano volcano-sh/volcano --version 1.12.1 -f values.json
    python -m components.upstream trainer-v2-values --stack prod > values.json
    helm template kubeflow-trainer oci://ghcr.io/kubeflow/charts/kubeflow-trainer --version 2.3.0 -f values.json
    python -m components.upstream kueue-values --stack prod > values.json
    helm template kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2 -f values.json
    python -m components.upstream images --stack prod                # what to copy into imageMirror

Exit status: 0 done, 2 invalid stack or input.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from .config import ConfigError, PlatformSpec, load_spec
from .manifests import (
    kueue_values,
    mirrored,
    operator_customization,
    system_node_selector,
    third_party_images,
    trainer_v2_images,
    trainer_v2_values,
    volcano_values,
)
from .plan import PlanError, find_project_dir, read_stack_file, stack_path


def load_stack(stack: str) -> PlatformSpec:
    """The validated spec of ``stacks/Pulumi.<stack>.yaml`` (credentials not needed)."""
    return load_spec(read_stack_file(stack_path(find_project_dir(), stack)), credentials=False)


def customize_rendered(text: str, spec: PlatformSpec) -> list[dict]:
    """The objects of a rendered operator overlay as the platform applies them."""
    customize = operator_customization(
        spec.operator, mirror=spec.image_mirror, node_selector=system_node_selector(spec.cluster)
    )
    objects = [obj for obj in yaml.safe_load_all(text) if obj]
    for obj in objects:
        customize(obj)
    return objects


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
    parser.add_argument("what", choices=["operator", "volcano-values", "trainer-v2-values", "kueue-values", "images"])
    parser.add_argument("--stack", required=True, help="plans stacks/Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    try:
        spec = load_stack(args.stack)
        if args.what == "operator":
            print(yaml.safe_dump_all(customize_rendered(sys.stdin.read(), spec), sort_keys=False), end="")
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
    except (ConfigError, PlanError, ValueError, yaml.YAMLError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
