"""Reading an .npz file safely: every array's header is checked before anything is allocated.

Base layer: the cache (its entries), the runs (logits uploads) and the data sets (npz data sets) read npz
files through :func:`headers`, and it imports nothing of theirs.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path
from typing import IO

import numpy as np

from relu_core.errors import InputError
from relu_core.limits import check_inflation, size_in_words

MAX_ARRAY_BYTES = 8 << 30
"""Largest uncompressed array read from an npz file (guards against allocation bombs in crafted headers)."""
NPY_MAGIC = b"\x93NUMPY"


def _member_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of the .npy stream ``member``, read without touching its data."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    return tuple(int(n) for n in shape), np.dtype(dtype), member.tell()


def headers(
    source: Path | bytes, *, label: str, max_bytes: int = MAX_ARRAY_BYTES
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The (shape, dtype) of every array of an npz file, read from the headers before anything is allocated.

    Refused with one line (``InputError``): a single .npy array saved under an .npz name, a file that is not
    a zip of .npy members, members that would inflate beyond :func:`relu_core.limits.inflation_budget` of the
    file's size together (a "zip bomb", checked on the zip's declared sizes before any member is opened),
    object (pickled) arrays, and any array whose header announces more bytes than its member holds (a crafted
    "allocation bomb") or more than ``max_bytes``.
    """
    head = source[: len(NPY_MAGIC)] if isinstance(source, bytes) else _read_head(source, label)
    if head == NPY_MAGIC:
        raise InputError(
            f"{label} is a single .npy array saved under an .npz name; save an .npz archive "
            "with named arrays (numpy.savez(file, name=array, ...))"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise InputError(f"{label} is not a valid npz archive ({error})") from None
    found = {}
    with archive:
        compressed = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
        check_inflation(sum(info.file_size for info in archive.infolist()), compressed, label)
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            try:
                with archive.open(info) as member:
                    shape, dtype, header_bytes = _member_header(member)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, SyntaxError) as error:
                raise InputError(f"{label}: member {info.filename!r} is not a valid .npy array ({error})") from None
            if dtype.hasobject:
                raise InputError(
                    f"{label} holds a pickled object array ({name!r}), which is refused for safety; "
                    "store plain numeric and string arrays"
                )
            needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
            held = info.file_size - header_bytes
            if needed > held:
                raise InputError(
                    f"{label}: array {name!r} announces shape {shape} ({needed:,} bytes) but the "
                    f"file holds only {max(held, 0):,} bytes (truncated or crafted header)"
                )
            if needed > max_bytes:
                raise InputError(
                    f"{label}: array {name!r} of shape {shape} needs {needed:,} bytes, more than the "
                    f"memory budget of {size_in_words(max_bytes)}"
                )
            found[name] = (shape, dtype)
    return found


def _read_head(path: Path, label: str) -> bytes:
    try:
        with Path(path).open("rb") as stream:
            return stream.read(len(NPY_MAGIC))
    except OSError as error:
        raise InputError(f"{label} is not a valid npz archive (cannot read it: {error.strerror or error})") from None
