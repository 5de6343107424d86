"""Outputs of other resources in a package component's inputs.

A TypeScript, Go or YAML program may pass another resource's output (a repository URL, a
secret) where the package's schema takes an input. The specs validate plain values, and a
resource's name or a pod's count must be known when the program runs; a job's image and its
environment values are only written into what is applied. So an output there is validated
as a stand-in text and replaced by the output in the applied object
(:func:`components._k8s.with_values`); an output anywhere else is refused naming its path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi

STAND_IN_IMAGE = "stand-in.invalid/output-{}:known-after-deploy"
"""What an image given as an output is validated as: a reference pinned by tag."""
STAND_IN_TEXT = "<output {}, known after deploy>"


class DeferredOutputs:
    """Stand-ins for outputs, each with the output it stands for (:attr:`values`)."""

    def __init__(self, accepted: Mapping[str, str]):
        """``accepted``: per pattern of an argument path (``jobs[0].image``), where the
        message of a refused output says outputs are taken."""
        self._accepted = {re.compile(pattern): where for pattern, where in accepted.items()}
        self.values: dict[str, pulumi.Input[Any]] = {}

    def known(self, value: Any, path: str) -> Any:
        """``value`` with each output in it replaced by a stand-in.

        Raises:
            ValueError: an output where a value must be known when the program runs.
        """
        if isinstance(value, pulumi.Output):
            if not any(pattern.search(path) for pattern in self._accepted):
                where = ", ".join(sorted(set(self._accepted.values())))
                raise ValueError(
                    f"{path}: must be known when the program runs, not another resource's output (outputs are "
                    f"taken in {where})"
                )
            template = STAND_IN_IMAGE if path.endswith(".image") else STAND_IN_TEXT
            stand_in = template.format(len(self.values))
            self.values[stand_in] = value
            return stand_in
        if isinstance(value, dict):
            return {key: self.known(item, f"{path}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [self.known(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return value
