"""Readers for the file formats behind the data sets: idx (MNIST family), plain-data pickles, npz arrays (their
headers checked by :mod:`relu_core.npz`)."""

from __future__ import annotations

import builtins
import gzip
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np

from relu_core import npz
from relu_core.datasets.base import DatasetError
from relu_core.errors import InputError

_MAX_PICKLE_BYTES = 1 << 20
_IDX_DTYPES = {0x08: np.dtype(np.uint8)}


def read_idx(path: Path) -> np.ndarray:
    """Read an idx file (``.gz`` or raw) of unsigned bytes, as in MNIST and Fashion-MNIST.

    Layout: two zero bytes, a type code (0x08 = uint8), the number of dimensions, each dimension as a
    big-endian uint32, then the values in C order. Returns a read-only array over the file's bytes.
    """
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as stream:
                data = stream.read()
        else:
            data = path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise DatasetError(f"cannot read {path}: {error}") from None
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in _IDX_DTYPES:
        raise DatasetError(f"{path} is not an idx file of unsigned bytes")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4)) if len(data) >= header else ()
    dtype = _IDX_DTYPES[data[2]]
    if len(shape) != ndim or len(data) != header + int(np.prod(shape)) * dtype.itemsize:
        raise DatasetError(f"{path} is truncated or malformed (its header announces shape {shape})")
    return np.frombuffer(data, dtype, offset=header).reshape(shape)


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickler that builds only dicts, lists, strings, bytes and ints: any other global is refused,
    so a hostile pickle cannot run code (nothing else is importable through ``find_class``)."""

    _ALLOWED = frozenset({"dict", "list", "str", "bytes", "int"})

    def find_class(self, module: str, name: str) -> type:
        if module in ("builtins", "__builtin__") and name in self._ALLOWED:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def read_plain_pickle(path: Path) -> dict[str, list[str]]:
    """Read a metadata pickle such as CIFAR's ``batches.meta`` / ``meta``: a dict with str keys whose
    list values hold str (or bytes, decoded as latin-1) names. Anything else raises DatasetError."""
    try:
        if path.stat().st_size > _MAX_PICKLE_BYTES:
            raise DatasetError(f"{path} is too large for a metadata pickle")
        with path.open("rb") as stream:
            content = _PlainDataUnpickler(stream, encoding="latin1").load()
    except DatasetError:
        raise
    except Exception as error:  # noqa: BLE001 - any unpickling failure is a malformed (or hostile) file
        raise DatasetError(f"cannot read {path} as a plain metadata pickle: {error}") from None
    if not isinstance(content, dict):
        raise DatasetError(f"{path} does not hold a dict")

    def text(value: object) -> object:
        return value.decode("latin1") if isinstance(value, bytes) else value

    return {
        text(key): [text(item) for item in value]
        for key, value in content.items()
        if isinstance(value, list) and all(isinstance(item, (str, bytes)) for item in value)
    }


def load_npz_arrays(
    source: Path | bytes,
    keys: tuple[str, ...],
    optional: tuple[str, ...] = (),
    *,
    label: str,
    max_bytes: int = npz.MAX_ARRAY_BYTES,
    check_declared: Callable[[dict[str, tuple[tuple[int, ...], np.dtype]]], None] | None = None,
) -> dict[str, np.ndarray]:
    """Read the arrays ``keys`` (required) and ``optional`` from an npz file or its bytes.

    ``allow_pickle=False``: object arrays (pickles) are refused. Every header is checked first
    (:func:`relu_core.npz.headers`, its refusals raised as DatasetError): a file that would inflate beyond its
    budget, arrays larger than their member or than ``max_bytes`` are refused before anything is allocated,
    and ``check_declared`` (given) is called with the declared (shape, dtype) of every array, to compare them
    before any is read. ``label`` names the file in messages.
    """

    def check(declared: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
        missing = [key for key in keys if key not in declared]
        if missing:
            held = ", ".join(declared) or "nothing"
            raise DatasetError(f"{label} lacks the array(s) {', '.join(missing)} (it holds: {held})")
        if check_declared is not None:
            check_declared(declared)

    try:
        return npz.read(source, label=label, names=(*keys, *optional), max_bytes=max_bytes, check=check)
    except DatasetError:
        raise
    except InputError as error:  # the same one line, as the data sets' error
        raise DatasetError(str(error)) from None
    except MemoryError:
        raise DatasetError(f"{label} is not a valid npz archive (MemoryError)") from None
