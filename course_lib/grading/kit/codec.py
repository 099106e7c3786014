"""Plain data across a process boundary, decoded without running any code of the sender's.

When a notebook is graded, an answer runs in a sandbox process and only plain data comes back: None, bools,
numbers, strings, bytes, lists, tuples, dicts, tensors and numpy arrays (as dtype, shape and raw bytes), and two
descriptions the sandbox makes — a *handle* for an object that stays in the sandbox (a module the answer built,
say) and an *error* the answer raised. The format is JSON with tagged values; decoding builds only those types,
so an object of the learner's cannot cross (pickle, by contrast, runs code while it loads).
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["CodecError", "Handle", "RemoteFailure", "decode", "encode", "is_plain"]

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
        torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip
_NUMPY = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
MAX_BYTES = 64 * 2**20  # one message; grading inputs and outputs are small


class CodecError(ValueError):
    """A message that is not plain data in this format (or is too large)."""


@dataclass(frozen=True)
class Handle:
    """An object that stays in the sandbox: its number there and what kind of object it is."""

    number: int
    type_name: str  # e.g. "SelfAttention"
    classes: tuple[str, ...]  # qualified names of its classes, e.g. ("__main__.SelfAttention", "torch.nn.Module", ...)
    callable: bool


@dataclass(frozen=True)
class RemoteFailure:
    """An exception raised in the sandbox: its class name, the qualified names of its classes, its message."""

    type_name: str
    classes: tuple[str, ...]
    message: str


def is_plain(value: Any) -> bool:
    """Whether `value` can cross as data (tensor subclasses such as nn.Parameter cross as plain tensors)."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return True
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.") in _DTYPES and value.layout == torch.strided
    if isinstance(value, np.ndarray):
        return value.dtype.name in _NUMPY
    if isinstance(value, np.generic):
        return value.dtype.name in _NUMPY
    if type(value) in (list, tuple):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):
        return all(is_plain(k) and is_plain(v) for k, v in value.items())
    return False


def _tag(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return {"int": str(int(value))}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, torch.Tensor):
        plain = value.detach().cpu().contiguous()
        raw = plain.reshape(-1).view(torch.uint8).numpy().tobytes() if plain.numel() else b""
        dtype = str(plain.dtype).removeprefix("torch.")
        return {"tensor": dtype, "shape": list(plain.shape), "data": base64.b64encode(raw).decode()}
    if isinstance(value, np.ndarray | np.generic):
        array = np.ascontiguousarray(value)
        data = base64.b64encode(array.tobytes()).decode()
        return {"ndarray": array.dtype.name, "shape": list(array.shape), "data": data, "scalar": np.isscalar(value)}
    if type(value) is list:
        return [_tag(v) for v in value]
    if type(value) is tuple:
        return {"tuple": [_tag(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_tag(k), _tag(v)] for k, v in value.items()]}
    if isinstance(value, Handle):
        return {"handle": value.number, "type": value.type_name, "mro": list(value.classes), "callable": value.callable}
    if isinstance(value, RemoteFailure):
        return {"failure": value.type_name, "mro": list(value.classes), "message": value.message}
    raise CodecError(f"not plain data: {type(value).__name__}")


def encode(value: Any) -> bytes:
    """`value` (plain data, handles, failures) as bytes."""
    return json.dumps(_tag(value), allow_nan=False).encode()


def _untag(node: Any) -> Any:
    if node is None or isinstance(node, bool | str | float):
        return node
    if isinstance(node, int):  # JSON ints only come from lengths inside tags; plain ints are tagged
        return node
    if isinstance(node, list):
        return [_untag(v) for v in node]
    if not isinstance(node, dict) or not node:
        raise CodecError("malformed message")
    if "int" in node:
        return int(node["int"])
    if "float" in node:
        return float(node["float"])
    if "bytes" in node:
        return base64.b64decode(node["bytes"])
    if "tuple" in node:
        return tuple(_untag(v) for v in node["tuple"])
    if "dict" in node:
        result = {}
        for key, value in node["dict"]:
            key = _untag(key)
            if isinstance(key, list | dict):  # unhashable keys cannot have been sent by an honest encoder
                raise CodecError("malformed dict key")
            result[key] = _untag(value)
        return result
    if "tensor" in node:
        dtype = _DTYPES.get(node["tensor"])
        if dtype is None:
            raise CodecError(f"tensor dtype {node['tensor']!r} is not allowed")
        shape = [int(n) for n in node["shape"]]
        raw = base64.b64decode(node["data"])
        count = math.prod(shape)
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        if flat.numel() != count * torch.empty((), dtype=dtype).element_size():
            raise CodecError("tensor data does not match its shape")
        return flat.view(dtype).reshape(shape).clone()
    if "ndarray" in node:
        if node["ndarray"] not in _NUMPY:
            raise CodecError(f"array dtype {node['ndarray']!r} is not allowed")
        array = np.frombuffer(base64.b64decode(node["data"]), dtype=np.dtype(node["ndarray"]))
        array = array.reshape([int(n) for n in node["shape"]]).copy()
        return array[()] if node.get("scalar") else array
    if "handle" in node:
        return Handle(int(node["handle"]), str(node["type"]), tuple(map(str, node["mro"])), bool(node["callable"]))
    if "failure" in node:
        return RemoteFailure(str(node["failure"]), tuple(map(str, node["mro"])), str(node["message"]))
    raise CodecError("malformed message")


def decode(data: bytes) -> Any:
    """The value `encode` wrote; CodecError for anything else."""
    if len(data) > MAX_BYTES:
        raise CodecError(f"message of {len(data)} bytes is larger than {MAX_BYTES}")
    try:
        return _untag(json.loads(data))
    except CodecError:
        raise
    except (ValueError, TypeError, KeyError, RuntimeError) as exc:
        raise CodecError(f"malformed message ({type(exc).__name__}: {exc})") from None
