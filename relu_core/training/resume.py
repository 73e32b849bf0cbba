"""A training run's checkpoint on disk, behind a SHA-256, as every other cache file is: a damaged checkpoint (a
flipped bit, a truncation) is never resumed from.

The file is one line, ``relu-checkpoint sha256 <64 hex digits>``, then the bytes of ``torch.save(state)``; the
digest is of those bytes. :func:`load` reads it with ``weights_only=True`` only when the digest matches; a file
that fails (or anything else squatting the path, a directory say) is moved aside (``cache.move_aside``: kept for
inspection, pruned) with a warning, and training starts again from its first epoch. :func:`save` writes it
atomically (``cache.atomic_write``); on a full disk the checkpoint is skipped with a warning and training goes
on (the state is serialised in memory first, so PyTorch never meets the failing write: writing to the file
itself, it reported ENOSPC as ``RuntimeError: ... unexpected pos``).
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import torch

from relu_core import cache

#: The first bytes of a checkpoint file, before the hex SHA-256 of the rest and a newline.
MAGIC = b"relu-checkpoint sha256 "


def save(path: Path, state: dict) -> bool:
    """Write ``state`` to ``path`` behind its SHA-256, atomically; False (with a warning, and the app's notice
    :func:`relu_core.cache.write_failure`) when the disk refuses it, True when written."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getbuffer()
    header = MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n"

    def write(stream) -> None:
        stream.write(header)
        stream.write(payload)

    try:
        cache.atomic_write(Path(path), write, move_non_file=True)
    except cache.WriteError as error:
        cache.note_write_failure(error, "the training checkpoint (training goes on; stopped, it starts again)")
        return False
    cache.note_write_success()
    return True


def load(path: Path | None, key: str) -> dict | None:
    """The checkpoint at ``path`` when its SHA-256 matches and it was written for ``key``, else None (training
    starts from its first epoch). A damaged file, or a directory squatting the path, is moved aside with a
    warning; a whole checkpoint of another key is left to be replaced."""
    if path is None:
        return None
    path = Path(path)
    if not path.is_file():
        if path.exists() or path.is_symlink():
            _set_aside(path, "is not a file")
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    view = memoryview(data)
    end = data.find(b"\n", 0, len(MAGIC) + 80)
    digest = data[len(MAGIC) : end] if data.startswith(MAGIC) and end > 0 else b""
    if not digest or hashlib.sha256(view[end + 1 :]).hexdigest().encode() != digest:
        _set_aside(path, "does not match its SHA-256 (damaged or truncated)")
        return None
    try:
        state = torch.load(io.BytesIO(view[end + 1 :]), map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - whole but unreadable (another PyTorch's format): start afresh
        _set_aside(path, "cannot be read")
        return None
    return state if isinstance(state, dict) and state.get("key") == key else None


def _set_aside(path: Path, why: str) -> None:
    aside = cache.move_aside(path)
    warnings.warn(
        f"the training checkpoint {path.name} {why}: moved aside to {aside.name}, training starts from its first epoch",
        stacklevel=3,
    )
