"""A small content-addressed store of numpy arrays (logits, perturbed scores) under ``data_cache/``.

A cache key is any JSON-serialisable description of *everything* the arrays depend on (weights hash,
data set fingerprint, transform, perturbation settings, ...). Its SHA-256 names the file
``<cache_dir(namespace)>/<sha256>.npz``. Files are written atomically (:func:`atomic_write`: temporary
file in the same directory, then ``os.replace``) and carry a SHA-256 checksum of their arrays *and* their
key; a file that is truncated, corrupted, rewritten with other arrays or copied from another key fails its
checksum, is deleted and treated as a miss, so the caller recomputes instead of using stale data. Anything
that is not a regular file where an entry should be (a directory, say) is moved aside (:func:`move_aside`;
at most :data:`MOVED_ASIDE_KEPT` per folder are kept, none older than :data:`MOVED_ASIDE_MAX_AGE_S`) and the
entry recomputed. Arrays are stored without pickle (strings as numpy unicode arrays) and read with
``allow_pickle=False``. Extracted folders (zips) are verified against a manifest of their files' sizes and
SHA-256 written at extraction (:func:`write_manifest`, :func:`manifest_matches`).

What the checks cover, exactly. The checksum proves an entry's integrity against accidents (a truncated or
corrupted file, a file copied from another key, a write cut short), not against someone with write access to the
cache, who can recompute it. On read, what can be checked cheaply is checked too: each entry records the key it
was written for (``__key__``, the key's JSON; an entry recording another key is dropped with a warning, and
moved aside), and :func:`cached`'s ``check`` checks the arrays against what the caller knows (cached logits: dtype
float32, shape against the data set, finite, and a few rows recomputed from the model, ``runs.check_logits``;
cached model weights: every name, shape and dtype of the network's state dict, ``runs.check_state``). An entry
that fails is moved aside (:func:`move_aside`) and computed again. A forger who writes arrays of the right kind,
shape and record that differ from the model's in rows the spot check does not draw is not detected: keep the cache
where only you can write (``RELU_STUDIO_CACHE``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from relu_core import npz, paths
from relu_core.errors import InputError

_CHECKSUM = "__checksum__"
#: The array holding the key an entry was written for (its JSON text, :func:`key_text`).
_KEY_RECORD = "__key__"
MANIFEST = ".manifest.json"
"""The manifest file inside an extracted folder (hidden: data-set listings skip dot files)."""


def key_text(key: Any) -> str:
    """A JSON-serialisable key as canonical text (dict keys sorted, so order does not matter)."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)


def key_digest(key: Any) -> str:
    """SHA-256 hex digest of a JSON-serialisable key (dict keys sorted, so order does not matter)."""
    return hashlib.sha256(key_text(key).encode()).hexdigest()


def array_digest(*arrays: np.ndarray) -> str:
    """SHA-256 hex digest of arrays' dtypes, shapes and bytes (a fingerprint of images, matrices, indices)."""
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def bytes_digest(*chunks: bytes) -> str:
    """SHA-256 hex digest of bytes held in memory (an upload), the chunks read one after the other."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _checksum(arrays: Mapping[str, np.ndarray], key_hex: str) -> str:
    digest = hashlib.sha256(key_hex.encode())
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(array_digest(arrays[name]).encode())
    return digest.hexdigest()


def path_for(namespace: str, key: Any) -> Path:
    """The file a key is (or would be) stored in."""
    return paths.cache_dir(namespace) / f"{key_digest(key)}.npz"


MOVED_ASIDE_KEPT = 2
"""Most moved-aside entries kept per cache folder, for inspection: the newest; older ones are deleted."""
MOVED_ASIDE_MAX_AGE_S = 24 * 3600
"""Moved-aside entries older than this (counted from the move) are deleted."""


def move_aside(path: Path) -> Path:
    """Rename whatever is at ``path`` (a directory where a file belongs, a damaged folder) to a sibling
    ``<name>.broken-<random>`` so it can be recomputed; InputError in one line when even that fails. Then the
    folder's moved-aside entries are pruned (:func:`prune_moved_aside`)."""
    aside = path.with_name(f"{path.name}.broken-{secrets.token_hex(4)}")
    try:
        path.rename(aside)
    except OSError as error:
        raise InputError(
            f"the cache entry {path} is damaged and cannot be moved aside "
            f"({error.strerror or error}): remove it and try again"
        ) from None
    with contextlib.suppress(OSError):  # its age counts from now
        os.utime(aside, follow_symlinks=False)
    prune_moved_aside(path.parent)
    return aside


def prune_moved_aside(folder: Path) -> None:
    """Delete the moved-aside entries of ``folder`` beyond the newest :data:`MOVED_ASIDE_KEPT` and those older
    than :data:`MOVED_ASIDE_MAX_AGE_S` (best effort: one another process removes meanwhile is skipped)."""
    moved = []
    for entry in folder.glob("*.broken-*"):
        with contextlib.suppress(OSError):
            moved.append((entry.lstat().st_mtime, entry))
    moved.sort(reverse=True)
    now = time.time()
    for rank, (when, entry) in enumerate(moved):
        if rank >= MOVED_ASIDE_KEPT or now - when > MOVED_ASIDE_MAX_AGE_S:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


class WriteError(InputError, OSError):
    """A file that could not be written (a full disk, a read-only folder; :func:`atomic_write`): an InputError
    whose one line names the path, for whoever asked for that file, and an OSError (with the ``errno``), so that
    work that only keeps something for later (a cache entry, a run's record, a checkpoint) goes on without it."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


_WRITE_FAILURE: list[str] = []  # the latest cache write that failed, while no cache write has succeeded since
_WRITE_FAILURE_LOCK = threading.Lock()


def note_write_failure(error: WriteError, what: str) -> None:
    """Record that the cache's ``what`` (an entry, a checkpoint) could not be written (:func:`write_failure`)
    and warn with ``error``'s line (one ``warning:`` line on the command line, the server's log in the app)."""
    reason = os.strerror(error.errno) if error.errno else "it cannot be written"
    with _WRITE_FAILURE_LOCK:
        _WRITE_FAILURE[:] = [
            f"The cache cannot be written ({reason}): results computed now work but are not kept (a link will not "
            f"reopen a run loaded now, a stopped training starts again); free space on the server's cache disk "
            f"or set {paths.CACHE_ENV} to another folder."
        ]
    warnings.warn(f"{what} not kept: {error}", stacklevel=3)


def note_write_success() -> None:
    """A cache write succeeded: the cache is writable again (:func:`write_failure` returns None)."""
    if _WRITE_FAILURE:
        with _WRITE_FAILURE_LOCK:
            _WRITE_FAILURE.clear()


def write_failure() -> str | None:
    """One line for the app's pages when the latest cache write failed and none has succeeded since (a full
    disk: the results still work, they are only not kept), else None. It names no server path."""
    return _WRITE_FAILURE[0] if _WRITE_FAILURE else None


DOCUMENT_MODE = 0o644
"""Permissions of a file the user saves (a report, a table, a figure): readable by everyone, as an editor
would write it. The cache's own files keep the temporary file's private 0600."""


def atomic_write(
    path: Path, write: Callable[[IO[bytes]], None], *, mode: int | None = None, move_non_file: bool = False
) -> Path:
    """Call ``write(stream)`` on a temporary file next to ``path``, then rename it onto ``path`` (readers see
    the old file or the complete new one, never half a file). A non-file at ``path`` (a directory, FIFO,
    device) is refused in one line, or moved aside with ``move_non_file`` (the cache's own entries only: never
    a path the user named).

    The file is private (0600, from ``tempfile.mkstemp``) unless ``mode`` gives its permission bits, set
    before the rename so that no reader ever sees other ones. Failing to write raises :class:`WriteError` (an
    InputError and an OSError) naming ``path`` (not the temporary file)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        if not move_non_file:
            raise InputError(f"{path} is {'a directory' if path.is_dir() else 'not a regular file'}, not a file")
        move_aside(path)
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
        with os.fdopen(handle, "wb") as tmp:
            write(tmp)
            if mode is not None:
                os.fchmod(tmp.fileno(), mode)
        os.replace(tmp_name, path)
    except BaseException as error:
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise WriteError(f"cannot write {path} ({error.strerror or error})", error.errno) from None
        raise
    return path


def write_document(path: Path, text: str) -> Path:
    """``text`` as UTF-8 at ``path`` for the user to read (:func:`atomic_write` with :data:`DOCUMENT_MODE`)."""
    return atomic_write(path, lambda stream: stream.write(text.encode("utf-8")), mode=DOCUMENT_MODE)


def load(namespace: str, key: Any) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None on a miss; a damaged file is deleted and reported as a miss."""
    path = path_for(namespace, key)
    if not path.is_file():
        if path.exists():  # a directory (or another non-file) squats the entry
            move_aside(path)
        return None
    try:
        # every header checked before anything is allocated (a crafted one must not allocate before its checksum
        # fails), read without ``ast`` (cache entries are read in job threads: relu_core.npz)
        arrays = npz.read(path, label=str(path))
        expected = str(arrays.pop(_CHECKSUM))
        if expected != _checksum(arrays, key_digest(key)):
            raise ValueError("checksum mismatch")
    except Exception:  # any damage (truncation, bad zip, missing or wrong checksum) means: recompute
        path.unlink(missing_ok=True)
        return None
    recorded = arrays.pop(_KEY_RECORD, None)  # absent in entries written before the record was kept
    if recorded is not None and str(recorded) != key_text(key):  # no accident: a valid checksum over a wrong key
        move_aside(path)
        warnings.warn(
            f"a cached entry ({namespace}) was dropped and computed again: it was written for another key than the "
            "one it is stored under (its checksum matches: a deliberate rewrite of the cache)",
            stacklevel=3,
        )
        return None
    return arrays


def save(namespace: str, key: Any, arrays: Mapping[str, np.ndarray]) -> Path | None:
    """Store ``arrays`` under ``key`` atomically, with the checksum of arrays and key; returns the file path.

    An entry that cannot be written (a full disk, a read-only cache: :class:`WriteError`) is only missing: None
    is returned, a warning says why and the app's pages say so (:func:`write_failure`); the caller goes on with
    the arrays it has."""
    if _CHECKSUM in arrays or _KEY_RECORD in arrays:
        raise ValueError(f"{_CHECKSUM!r} and {_KEY_RECORD!r} are reserved array names")
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    arrays[_KEY_RECORD] = np.array(key_text(key))
    checksum = np.array(_checksum(arrays, key_digest(key)))
    try:
        path = atomic_write(
            path_for(namespace, key),
            lambda stream: np.savez(stream, **arrays, **{_CHECKSUM: checksum}),
            move_non_file=True,
        )
    except WriteError as error:
        note_write_failure(error, f"the cache entry ({namespace})")
        return None
    note_write_success()
    return path


def _listing(folder: Path) -> dict[str, list]:
    return {
        path.relative_to(folder).as_posix(): [path.stat().st_size, file_digest(path)]
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }


def write_manifest(folder: Path) -> None:
    """Record every file of ``folder`` (relative path, size, SHA-256) in ``folder/.manifest.json``."""
    text = json.dumps(_listing(folder), sort_keys=True)
    atomic_write(folder / MANIFEST, lambda stream: stream.write(text.encode()), move_non_file=True)


def manifest_matches(folder: Path) -> bool:
    """True when ``folder`` holds exactly the files of its manifest, with the same sizes and SHA-256."""
    try:
        recorded = json.loads((folder / MANIFEST).read_text())
        return recorded == _listing(folder)
    except (OSError, ValueError):
        return False


_KEY_LOCKS: dict[str, tuple[threading.Lock, int]] = {}
_KEY_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def _key_lock(digest: str) -> Iterator[None]:
    """One lock per key being computed, dropped when its last user leaves (memory bounded by the users)."""
    with _KEY_LOCKS_GUARD:
        lock, users = _KEY_LOCKS.get(digest, (threading.Lock(), 0))
        _KEY_LOCKS[digest] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _KEY_LOCKS_GUARD:
            lock, users = _KEY_LOCKS[digest]
            if users == 1:
                del _KEY_LOCKS[digest]
            else:
                _KEY_LOCKS[digest] = (lock, users - 1)


def cached(
    namespace: str,
    key: Any,
    compute: Callable[[], Mapping[str, np.ndarray]],
    check: Callable[[Mapping[str, np.ndarray]], None] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays for ``key`` from the cache, or ``compute()``-d, stored and returned on a miss.

    ``check`` (given) raises InputError for arrays that must not be used. It is asked of the arrays read from
    the cache too, since a checksum only proves that an entry was not changed by accident: an entry that
    fails it is moved aside (:func:`move_aside`) and computed again, with a warning saying why; computed arrays
    that fail it raise.
    Threads of one process (the app's sessions) asking for the same key wait for one computation instead of
    each running it (a lock per key; nested computations of other keys take their own locks).
    """
    with _key_lock(f"{namespace}/{key_digest(key)}"):
        arrays = load(namespace, key)
        if arrays is not None and check is not None:
            try:
                check(arrays)
            except InputError as error:
                move_aside(path_for(namespace, key))
                warnings.warn(f"a cached entry ({namespace}) was dropped and computed again: {error}", stacklevel=2)
                arrays = None
        if arrays is None:
            arrays = {name: np.asarray(value) for name, value in compute().items()}
            if check is not None:
                check(arrays)
            save(namespace, key, arrays)
    return arrays
