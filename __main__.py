"""The ack-training-platform program: validate the stack, create the platform, export."""

from pathlib import Path

import pulumi

from components.platform import TrainingPlatform
from components.stack import image_lock, is_secret_section, local_sources, stack_secret, stack_spec

project = Path(__file__).resolve().parent
spec = stack_spec()
platform = TrainingPlatform(
    "platform",
    spec,
    sources=local_sources(project, spec),
    image_digests=image_lock(project, spec),
    registry_password=stack_secret("registryPassword"),
    secret_jobs=is_secret_section("jobs"),
    # Stacks created before the platform was one component hold its parts as the stack's own.
    moved_from_stack=True,
)
for key, value in platform.stack_outputs().items():
    pulumi.export(key, value)
