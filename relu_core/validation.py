"""The validators of numbers given by users, shared by the library and the command line.

Each raises :class:`~relu_core.errors.InputError` with one line naming ``what`` was wrong and the value given.
Booleans are refused where integers are expected (``True`` is an ``int`` in Python, never a count here).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np

from relu_core.errors import InputError

#: The largest integer any option or argument takes (a 64-bit signed integer): numpy and torch take seeds up to it,
#: and a seed of 2^70 passed the validators, then failed in ``torch.manual_seed`` ("Overflow when unpacking long
#: long"). No count, size or seed here comes near it.
MAX_INTEGER = 2**63 - 1


def is_integer(value: object) -> bool:
    """True for Python and numpy integers, False for booleans and everything else."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _integer_kind(minimum: int | None, maximum: int | None) -> str:
    if maximum is not None:
        return f"an integer in [{minimum}, {maximum}]" if minimum is not None else f"an integer <= {maximum}"
    if minimum == 1:
        return "a positive integer"
    return "an integer" if minimum is None else f"an integer >= {minimum}"


def integer(value: object, what: str, *, minimum: int | None = None, maximum: int | None = None, hint: str = "") -> int:
    """``value`` as an ``int`` when it is an integer (not a bool) in ``[minimum, maximum]`` (either bound may be
    None; without ``maximum``, at most :data:`MAX_INTEGER`); else InputError ``"<what> must be <kind><hint>, got
    <value>"``."""
    if not is_integer(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InputError(f"{what} must be {_integer_kind(minimum, maximum)}{hint}, got {value!r}")
    if maximum is None and value > MAX_INTEGER:
        raise InputError(f"{what} must be at most {MAX_INTEGER:,} (2^63 − 1, a 64-bit integer){hint}, got {value!r}")
    return int(value)  # type: ignore[call-overload]


def fraction(value: object, what: str) -> float:
    """``value`` as a float strictly between 0 and 1; else InputError naming ``what``."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number strictly between 0 and 1, got {value!r}") from None
    if not 0.0 < number < 1.0:  # NaN fails too
        raise InputError(f"{what} must lie strictly between 0 and 1, got {value!r}")
    return number


def non_negative(value: object, what: str) -> float:
    """``value`` as a finite float >= 0; else InputError naming ``what``."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a finite number >= 0, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{what} must be a finite number >= 0, got {value!r}")
    return number


# ------------------------------------------------------------------------------- command-line text


def parse_fraction(text: str, flag: str) -> float:
    """A command-line value strictly between 0 and 1 (InputError naming the flag otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{flag} must be a number, got {text!r}") from None
    return fraction(value, flag)


def parse_int(text: str, flag: str, *, minimum: int | None = None) -> int:
    """A command-line integer of at least ``minimum`` (InputError naming the flag otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{flag} must be {_integer_kind(minimum, None)}, got {text!r}") from None
    return integer(value, flag, minimum=minimum)


def output_file(path: str | Path, what: str = "--out") -> Path:
    """``path`` as a file the user asked to write, checked before any work: it needs a name, an existing
    folder this process can write into, and nothing but a regular file at ``path`` (a directory, FIFO or device
    there is refused, never replaced)."""
    given, path = str(path), Path(path)
    if path.name in ("", ".", ".."):
        raise InputError(f"{what} needs a file name, got {given!r}")
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise InputError(f"{what} {path} is {kind}: give the name of a file to write")
    if not path.parent.is_dir():
        raise InputError(f"{what} {path}: no such directory {path.parent}")
    _probe(path.parent, f"{what} {path}")
    return path


def _probe(folder: Path, what: str) -> None:
    """InputError unless a file can be created in ``folder`` (tried: permissions alone do not tell, as root
    or on /sys, /proc or a read-only mount)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise InputError(f"{what}: cannot write into {folder} ({error.strerror or error})") from None


def output_folder(path: str | Path, what: str = "--out") -> Path:
    """``path`` as a folder the user asked to write files into, checked before any work (and created only
    when the files are written): not a file, and its nearest existing folder writable by this process."""
    if not str(path).strip():
        raise InputError(f"{what} needs a folder name")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path} is a file, not a folder")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())  # nothing is created yet
    if not existing.is_dir():
        raise InputError(f"{what} {path}: {existing} is a file, not a folder")
    _probe(existing, f"{what} {path}")
    return path
