"""Reading an .npz file safely: every array's header is checked before anything is allocated.

Base layer: the cache (its entries), the runs (logits uploads) and the data sets (npz data sets) read npz
files through :func:`read` (:func:`headers` first), the corruptions their .npy files through :func:`open_npy`,
and it imports nothing of theirs.

The .npy header, a Python dict literal (``{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }``), is
read by :func:`parse_header`, a small strict parser of that format, never by ``ast``: numpy's own reader calls
``ast.literal_eval``, and CPython 3.11's AST constructor is not thread-safe (a job thread reading an npz while
Streamlit parsed a page met ``SystemError: AST constructor recursion depth mismatch``). Nothing here reaches
``ast`` (``tests/hostile/test_hostile_threads.py``).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import numpy as np

from relu_core.errors import InputError
from relu_core.limits import check_inflation, size_in_words

MAX_ARRAY_BYTES = 8 << 30
"""Largest uncompressed array read from an npz file (guards against allocation bombs in crafted headers)."""
NPY_MAGIC = b"\x93NUMPY"
#: The longest header read, in characters: numpy's own bound (``numpy.lib.format``'s ``max_header_size``).
MAX_HEADER_CHARS = 10_000
#: How deep lists and tuples may nest in a header (a structured dtype's fields, sub-arrays): far beyond any
#: dtype numpy writes, and a bound on the parser's recursion.
MAX_HEADER_DEPTH = 32
#: Bytes read from a member at a time when its data is read.
READ_CHUNK_BYTES = 1 << 20

#: Per .npy format version: the struct of the header's length, and the header's encoding.
_VERSIONS = {(1, 0): ("<H", "latin1"), (2, 0): ("<I", "latin1"), (3, 0): ("<I", "utf8")}
_HEADER_KEYS = {"descr", "fortran_order", "shape"}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Header:
    """A recursive-descent reader of the Python literals a .npy header holds: a dict with string keys; strings
    (quoted with ' or ", the escapes ``repr`` writes), decimal integers (with Python 2's ``L`` suffix where
    ``longs``), True, False, tuples and lists. Anything else (names, calls, floats, operators, sets) is refused."""

    def __init__(self, text: str, longs: bool):
        self.text = text
        self.at = 0
        self.longs = longs

    def fail(self, what: str):
        raise ValueError(f"cannot parse the .npy header: {what} at character {self.at} of {self.text[:200]!r}")

    def skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t\r\n":
            self.at += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.at] if self.at < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.fail(f"expected {char!r}")
        self.at += 1

    def document(self) -> object:
        value = self.value(0)
        if self.peek():
            self.fail("text after the header's value")
        return value

    def value(self, depth: int) -> object:
        if depth > MAX_HEADER_DEPTH:
            self.fail(f"nested deeper than {MAX_HEADER_DEPTH}")
        char = self.peek()
        if not char:
            self.fail("unexpected end")
        if char == "{":
            return self.mapping(depth)
        if char in "([":
            return self.sequence(depth, char)
        if char in "'\"" or (char in "uU" and self.text[self.at + 1 : self.at + 2] in ("'", '"')):
            return self.string()
        if char.isdigit() or char == "-":
            return self.integer()
        for word, meaning in (("True", True), ("False", False)):
            if (
                self.text.startswith(word, self.at)
                and not self.text[self.at + len(word) : self.at + len(word) + 1].isalnum()
            ):
                self.at += len(word)
                return meaning
        self.fail("unexpected text")

    def mapping(self, depth: int) -> dict:
        self.expect("{")
        found: dict = {}
        while self.peek() != "}":
            key = self.value(depth + 1)
            if not isinstance(key, str):
                self.fail("a key that is not a string")
            if key in found:
                self.fail(f"the key {key!r} twice")
            self.expect(":")
            found[key] = self.value(depth + 1)
            if self.peek() != ",":
                break
            self.at += 1
        self.expect("}")
        return found

    def sequence(self, depth: int, opening: str) -> tuple | list:
        closing = ")" if opening == "(" else "]"
        self.expect(opening)
        items = []
        comma = False
        while self.peek() != closing:
            items.append(self.value(depth + 1))
            comma = self.peek() == ","
            if not comma:
                break
            self.at += 1
        self.expect(closing)
        if opening == "(":
            if len(items) == 1 and not comma:
                return items[0]  # a parenthesised value, as in Python
            return tuple(items)
        return items

    def integer(self) -> int:
        start = self.at
        if self.text[self.at] == "-":
            self.at += 1
        digits = self.at
        while self.at < len(self.text) and self.text[self.at].isascii() and self.text[self.at].isdigit():
            self.at += 1
        number = self.text[digits : self.at]
        if not number or (len(number) > 1 and number[0] == "0") or len(number) > 30:
            self.fail("not a plain decimal integer")
        if self.longs and self.text[self.at : self.at + 1] == "L":
            self.at += 1
        if self.text[self.at : self.at + 1].isalnum() or self.text[self.at : self.at + 1] in ("_", "."):
            self.fail("not a plain decimal integer")
        return int(self.text[start : self.at].rstrip("L"))

    def string(self) -> str:
        if self.text[self.at] in "uU":
            self.at += 1
        quote = self.text[self.at]
        self.at += 1
        parts = []
        while True:
            if self.at >= len(self.text) or self.text[self.at] in "\r\n":
                self.fail("an unterminated string")
            char = self.text[self.at]
            self.at += 1
            if char == quote:
                return "".join(parts)
            if char != "\\":
                parts.append(char)
                continue
            escape = self.text[self.at : self.at + 1]
            self.at += 1
            if escape in _ESCAPES:
                parts.append(_ESCAPES[escape])
            elif escape in _HEX_ESCAPES:
                digits = self.text[self.at : self.at + _HEX_ESCAPES[escape]]
                self.at += len(digits)
                if len(digits) != _HEX_ESCAPES[escape] or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    self.fail(f"a bad \\{escape} escape")
                code = int(digits, 16)
                if code > 0x10FFFF:
                    self.fail(f"a bad \\{escape} escape")
                parts.append(chr(code))
            else:
                self.fail(f"an unsupported escape \\{escape}")


def parse_header(text: str, version: tuple[int, int] = (1, 0)) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of a .npy header's text, e.g.
    ``{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }``, read without ``ast``.

    Exactly what numpy writes is read as numpy reads it (``tests/hostile/test_hostile_threads.py`` compares the
    two on many dtypes and shapes, structured ones included); Python 2's ``3L`` is read for format versions 1.0
    and 2.0, as numpy does. Refused with ValueError: a header longer than :data:`MAX_HEADER_CHARS` (numpy's
    bound), anything but a dict of exactly the keys descr, fortran_order, shape, a shape that is not a tuple of
    non-negative integers, a fortran_order that is not a bool, a descr numpy cannot make a dtype of; and, stricter
    than numpy, text that is no plain literal (``0x10``, ``1_0``, a key given twice)."""
    if len(text) > MAX_HEADER_CHARS:
        raise ValueError(f"the .npy header is {len(text):,} characters long, more than the {MAX_HEADER_CHARS:,} read")
    found = _Header(text, longs=version <= (2, 0)).document()
    if not isinstance(found, dict):
        raise ValueError(f"the .npy header is not a dictionary: {text[:200]!r}")
    if found.keys() != _HEADER_KEYS:
        raise ValueError(f"the .npy header does not hold exactly the keys descr, fortran_order, shape: {sorted(found)}")
    shape = found["shape"]
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"the .npy header's shape is not valid: {shape!r}")
    if not isinstance(found["fortran_order"], bool):
        raise ValueError(f"the .npy header's fortran_order is not a bool: {found['fortran_order']!r}")
    try:
        dtype = np.lib.format.descr_to_dtype(found["descr"])
    except (TypeError, ValueError, KeyError, IndexError) as error:
        raise ValueError(f"the .npy header's descr is not a valid dtype ({error}): {found['descr']!r}") from None
    return shape, found["fortran_order"], dtype


def _read_exactly(stream: IO[bytes], size: int, what: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ValueError(f"EOF: reading {what}, expected {size} bytes got {len(data)}")
    return data


def read_header(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header length in bytes) of the .npy stream ``stream``, read from its start
    without touching its data (:func:`parse_header`); ValueError when it is no .npy stream."""
    magic = _read_exactly(stream, len(NPY_MAGIC) + 2, "the magic string")
    if magic[: len(NPY_MAGIC)] != NPY_MAGIC:
        raise ValueError(f"the magic string is not correct; expected {NPY_MAGIC!r}, got {magic[:6]!r}")
    version = (magic[-2], magic[-1])
    if version not in _VERSIONS:
        raise ValueError(f"unsupported .npy format version {version}")
    length_format, encoding = _VERSIONS[version]
    (length,) = struct.unpack(length_format, _read_exactly(stream, struct.calcsize(length_format), "the header length"))
    if length > 4 * MAX_HEADER_CHARS:
        raise ValueError(f"the .npy header is {length:,} bytes long, more than the {MAX_HEADER_CHARS:,} read")
    try:
        text = _read_exactly(stream, length, "the header").decode(encoding)
    except UnicodeDecodeError as error:
        raise ValueError(f"the .npy header is not {encoding} text ({error.reason})") from None
    shape, fortran_order, dtype = parse_header(text, version)
    return shape, fortran_order, dtype, len(magic) + struct.calcsize(length_format) + length


def _member_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of the .npy stream ``member``, read without touching its data."""
    shape, _, dtype, length = read_header(member)
    return shape, dtype, length


def _read_array(member: IO[bytes]) -> np.ndarray:
    """The array of the .npy stream ``member`` (its header checked by :func:`headers` before), read in chunks of
    :data:`READ_CHUNK_BYTES` into the array itself, as ``numpy.lib.format.read_array`` does."""
    shape, fortran_order, dtype, _ = read_header(member)
    if dtype.hasobject:
        raise ValueError("object arrays are refused")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    array = np.ndarray(count, dtype=dtype)  # np.ndarray, not np.empty: zero-width strings (numpy's own comment)
    if dtype.itemsize and count:
        raw = memoryview(array.view(np.uint8))
        at = 0
        while at < raw.nbytes:
            got = member.readinto(raw[at : at + READ_CHUNK_BYTES])
            if not got:
                raise ValueError(f"EOF: the array data ends after {at:,} of {raw.nbytes:,} bytes")
            at += got
    if fortran_order:
        return array.reshape(shape[::-1]).transpose()
    return array.reshape(shape)


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
            except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
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


def read(
    source: Path | bytes,
    *,
    label: str,
    names: Iterable[str] | None = None,
    max_bytes: int = MAX_ARRAY_BYTES,
    check: Callable[[dict[str, tuple[tuple[int, ...], np.dtype]]], None] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays ``names`` (every array when None; a name the file lacks is left out) of an npz file or its
    bytes, by name, as ``numpy.load`` would give them, read without ``ast`` (:func:`parse_header`).

    Every header is checked first (:func:`headers`, its refusals in one line: InputError), then ``check`` (given)
    is called with every array's declared (shape, dtype), to compare them before any is read. A member that
    fails while it is read (a corrupted deflate stream, data shorter than its header said) raises InputError
    naming it."""
    declared = headers(source, label=label, max_bytes=max_bytes)
    if check is not None:
        check(declared)
    wanted = set(declared if names is None else names)
    found = {}
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as archive:
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if name in wanted:
                    try:
                        with archive.open(info) as member:
                            found[name] = _read_array(member)
                    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
                        raise InputError(
                            f"{label}: member {info.filename!r} is not a valid .npy array ({error})"
                        ) from None
    except (zipfile.BadZipFile, OSError) as error:
        raise InputError(f"{label} is not a valid npz archive ({error})") from None
    return found


def open_npy(path: Path) -> np.memmap:
    """The array of the .npy file ``path``, memory-mapped read-only (``numpy.load(path, mmap_mode="r")``, its
    header read by :func:`parse_header`). ValueError or OSError when it is no readable .npy file, an object array
    or shorter than its header says."""
    with Path(path).open("rb") as stream:
        shape, fortran_order, dtype, offset = read_header(stream)
    if dtype.hasobject:
        raise ValueError("object arrays cannot be memory-mapped")
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, order="F" if fortran_order else "C", offset=offset)


def _read_head(path: Path, label: str) -> bytes:
    try:
        with Path(path).open("rb") as stream:
            return stream.read(len(NPY_MAGIC))
    except OSError as error:
        raise InputError(f"{label} is not a valid npz archive (cannot read it: {error.strerror or error})") from None
