"""Plain model weights in and out: the final model a run exports, and the pretrained
weights a fine-tuning run starts from (``--init-from``).

The final model is a plain ``state_dict`` (``torch.load(..., weights_only=True)``) and,
when the ``safetensors`` package is installed, the same tensors as ``.safetensors`` next
to it, for tools that read that format. Weights to start from are read with
``weights_only=True`` (or from a ``.safetensors`` file), memory-mapped so a rank never
holds a second copy.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from .sharded import write_atomic

try:
    import safetensors.torch as safetensors
except ImportError:  # optional: the .pt file alone is the contract
    safetensors = None


class WeightsError(ValueError):
    """Weights that cannot be read or do not fit the model (a user error)."""


def export(weights: dict[str, torch.Tensor], path: Path) -> list[Path]:
    """Write ``weights`` to ``path`` (a plain state_dict) and, with safetensors installed,
    to ``path`` with the suffix ``.safetensors``; each file atomically.

    Returns:
        The files written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    write_atomic(path, buffer.getvalue())
    written = [path]
    if safetensors is not None:
        # safetensors refuses tensors that share memory (the GPT's tied embedding and
        # head): the second name gets a copy of its own.
        seen: set[int] = set()
        tensors = {}
        for name, tensor in weights.items():
            pointer = tensor.untyped_storage().data_ptr()
            tensors[name] = tensor.clone() if pointer in seen else tensor.contiguous()
            seen.add(pointer)
        sibling = path.with_suffix(".safetensors")
        write_atomic(sibling, safetensors.save(tensors))
        written.append(sibling)
    return written


def load(path: Path) -> dict[str, torch.Tensor]:
    """Read plain weights from a ``torch.save`` file or a ``.safetensors`` file.

    Raises:
        WeightsError: the file is missing, unreadable, or holds anything but tensors.
    """
    if not path.is_file():
        raise WeightsError(f"--init-from {path}: no such file")
    try:
        if path.suffix == ".safetensors":
            if safetensors is None:
                raise WeightsError(f"--init-from {path}: reading .safetensors needs the safetensors package")
            return safetensors.load_file(path)
        weights = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except WeightsError:
        raise
    except Exception as err:  # torch.load raises many types for a foreign or torn file
        raise WeightsError(f"--init-from {path}: not a state_dict of tensors ({err})") from None
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise WeightsError(f"--init-from {path}: not a state_dict of tensors")
    return weights
