"""User data: image folders (a directory or an uploaded zip) and npz arrays, validated and cached."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from relu_core import cache, paths
from relu_core.datasets.base import DatasetError, ImageSet
from relu_core.datasets.formats import load_npz_arrays
from relu_core.errors import InputError
from relu_core.limits import check_inflation, size_in_words
from relu_core.npz import MAX_ARRAY_BYTES
from relu_core.progress import Progress, duration_words, report

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})
MAX_ZIP_BYTES = 1 << 30
"""Default limit on the total uncompressed size of an image-folder zip."""
MAX_ZIP_ENTRIES = 200_000
"""Default limit on the number of entries of an image-folder zip."""

_GREY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F"})
_FOLDER_CACHE_VERSION = "imagefolder-v2"
_PROGRESS_EVERY = 500


# ---------------------------------------------------------------------------------------------- image folders


def _visible(name: str) -> bool:
    """Skip hidden entries and the resource forks macOS adds to zips."""
    return not name.startswith(".") and name != "__MACOSX"


def _list_image_folder(root: Path) -> tuple[tuple[str, ...], list[Path], np.ndarray, str]:
    """Class names (sorted sub-folder names), image files (sorted per class), labels, and a key over the
    relative paths and every file's SHA-256 (it changes whenever a file is added, removed or its content changes,
    whatever its size and modification time)."""
    if not root.is_dir():
        raise DatasetError(f"image folder {root} does not exist or is not a directory")
    class_names = tuple(sorted(e.name for e in os.scandir(root) if e.is_dir() and _visible(e.name)))
    if not class_names:
        raise DatasetError(f"{root} has no class folders: an image folder holds <class>/<image> files")
    files: list[Path] = []
    labels: list[int] = []
    digest = hashlib.sha256(_FOLDER_CACHE_VERSION.encode())
    for label, class_name in enumerate(class_names):
        entries = sorted(
            (
                e
                for e in os.scandir(root / class_name)
                if _visible(e.name) and Path(e.name).suffix.lower() in IMAGE_EXTENSIONS and e.is_file()
            ),
            key=lambda e: e.name,
        )
        if not entries:
            raise DatasetError(
                f"class folder {root / class_name} holds no images (looked for {', '.join(sorted(IMAGE_EXTENSIONS))})"
            )
        for entry in entries:  # keyed on content: an image replaced by another of the same size and mtime is
            # decoded again (hashing 10,000 CIFAR-10 JPEGs takes about 0.3 s here, far less than decoding them)
            content = hashlib.sha256(Path(entry.path).read_bytes()).hexdigest()
            digest.update(f"{class_name}/{entry.name}\0{content}\n".encode())
            files.append(Path(entry.path))
        labels.extend([label] * len(entries))
    return class_names, files, np.asarray(labels, dtype=np.int64), digest.hexdigest()


def _decode_images(files: list[Path], progress: Progress | None) -> np.ndarray:
    """Decode every file to uint8 (N, H, W, C): grey (C=1) when every image is grey, else RGB (C=3).

    Reads the headers first (cheap) to refuse mixed sizes before decoding anything, then decodes in a
    thread pool (Pillow releases the GIL while decoding).
    """
    sizes, grey = {}, True
    for path in files:
        try:
            with Image.open(path) as image:
                sizes.setdefault(image.size, path)
                grey = grey and image.mode in _GREY_MODES
        except (OSError, Image.DecompressionBombError, ValueError) as error:
            raise DatasetError(f"cannot read image {path}: {error}") from None
        if len(sizes) > 1:
            (first_size, first), (size, offending) = sizes.items()
            raise DatasetError(
                f"all images must have the same size: {offending} is {size[0]}x{size[1]} but "
                f"{first} is {first_size[0]}x{first_size[1]}; resize them first"
            )
    ((width, height),) = sizes
    channels, mode = (1, "L") if grey else (3, "RGB")
    shape = (len(files), height, width, channels)
    if np.prod(shape, dtype=np.int64) > MAX_ARRAY_BYTES:
        raise DatasetError(
            f"{len(files)} images of {width}x{height} would need more than {size_in_words(MAX_ARRAY_BYTES)}"
        )
    images = np.empty(shape, dtype=np.uint8)

    def decode(index: int) -> None:
        path = files[index]
        try:
            with Image.open(path) as image:
                pixels = np.asarray(image.convert(mode))
        except (OSError, Image.DecompressionBombError, ValueError) as error:
            raise DatasetError(f"cannot decode image {path}: {error}") from None
        images[index] = pixels.reshape(height, width, channels)

    report(progress, 0, len(files), "decoding images")
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for done, _ in enumerate(pool.map(decode, range(len(files))), start=1):
            if done % _PROGRESS_EVERY == 0 or done == len(files):
                report(progress, done, len(files), f"decoding images ({done}/{len(files)})")
    return images


def read_image_folder(root: Path, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Images, labels and class names of ``root/<class>/<image>``, decoded once and then cached.

    Classes are the sorted sub-folder names (label = position), images are sorted by file name in each
    class; hidden files and files without an image extension are skipped. The decoded arrays are cached as
    npz in ``relu_core.cache`` (namespace ``datasets/imagefolder``), keyed by the folder's paths and every file's
    SHA-256 (its content: an image replaced by another of the same size and mtime is decoded again; reading the
    files to hash them costs far less than decoding them), so the second load of an unchanged folder skips
    decoding; a damaged or rewritten cache file fails its checksum and is rebuilt.
    """
    class_names, files, labels, key = _list_image_folder(root)
    cache_key = {"kind": _FOLDER_CACHE_VERSION, "listing": key}
    cached = cache.load("datasets/imagefolder", cache_key)
    if cached is not None and cached["images"].shape[0] == len(files) and np.array_equal(cached["labels"], labels):
        return cached["images"], labels, class_names
    images = _decode_images(files, progress)
    cache.save("datasets/imagefolder", cache_key, {"images": images, "labels": labels})
    return images, labels, class_names


def load_image_folder(
    path: str | os.PathLike, *, name: str | None = None, progress: Progress | None = None
) -> ImageSet:
    """An ``ImageSet`` from an image folder ``<class>/<image>`` (see ``read_image_folder``).

    Every image must have the same size (a differing one is named in the error; resize beforehand);
    images are grey (C=1) when all of them are grey, else all are converted to RGB.
    """
    root = Path(path).expanduser()
    images, labels, class_names = read_image_folder(root, progress)
    return ImageSet(name or root.resolve().name, images, labels, class_names)


# ------------------------------------------------------------------------------------------------------- zips


def _checked_entries(
    archive: zipfile.ZipFile, label: str, compressed_bytes: int, max_bytes: int, max_entries: int
) -> list[tuple[zipfile.ZipInfo, list[str]]]:
    """The entries with their path parts, after refusing anything unsafe: too many entries, a total
    uncompressed size over ``max_bytes`` or over the inflation budget of the archive's ``compressed_bytes``
    (:func:`relu_core.limits.inflation_budget`), absolute paths, ``..`` parts, symlinks and special files."""
    infos = archive.infolist()
    if len(infos) > max_entries:
        raise DatasetError(f"{label} has {len(infos)} entries, more than the limit of {max_entries}")
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise DatasetError(f"{label} expands to {total:,} bytes, more than the limit of {size_in_words(max_bytes)}")
    try:
        check_inflation(total, compressed_bytes, label, cap=max_bytes)
    except InputError as error:  # the same one line, as the data sets' error
        raise DatasetError(str(error)) from None
    entries = []
    for info in infos:
        name = info.filename.replace("\\", "/")
        parts = name.split("/")
        if name.startswith("/") or (len(parts[0]) >= 2 and parts[0][1] == ":"):
            raise DatasetError(f"{label} contains an absolute path ({info.filename!r}); refused")
        if ".." in parts:
            raise DatasetError(f"{label} contains a '..' entry ({info.filename!r}); refused")
        if "\0" in name:
            raise DatasetError(f"{label} contains an entry name with a NUL byte; refused")
        file_type = stat.S_IFMT(info.external_attr >> 16)
        if file_type == stat.S_IFLNK:
            raise DatasetError(f"{label} contains a symbolic link ({info.filename!r}); refused")
        if file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise DatasetError(f"{label} contains a special file ({info.filename!r}); refused")
        parts = [part for part in parts if part not in ("", ".")]
        if parts:
            entries.append((info, parts))
    return entries


def _extract(
    archive: zipfile.ZipFile,
    entries: list[tuple[zipfile.ZipInfo, list[str]]],
    target: Path,
    label: str,
    max_bytes: int,
    progress: Progress | None,
) -> None:
    """Extract into a temporary sibling of ``target`` and rename it into place (atomic: a complete folder
    or none). The bytes written are counted again, so a lying size header cannot exceed ``max_bytes``."""
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{target.name}.", suffix=".tmp"))
    try:
        written = 0
        for done, (info, parts) in enumerate(entries, start=1):
            destination = staging.joinpath(*parts)
            if info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, destination.open("wb") as sink:
                while chunk := source.read(1 << 20):
                    written += len(chunk)
                    if written > max_bytes:
                        raise DatasetError(f"{label} expands to more than the limit of {size_in_words(max_bytes)}")
                    sink.write(chunk)
            if done % _PROGRESS_EVERY == 0:
                report(progress, done, len(entries), f"extracting {label} ({done}/{len(entries)})")
        cache.write_manifest(staging)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not a concurrent extraction of the same archive that won the race
                raise
            shutil.rmtree(staging)
    except BaseException as error:  # refused, failed or cancelled: nothing stays behind
        shutil.rmtree(staging, ignore_errors=True)
        damaged = (OSError, ValueError, RuntimeError, NotImplementedError, EOFError, zlib.error, zipfile.BadZipFile)
        if isinstance(error, damaged) and not isinstance(error, DatasetError):
            raise DatasetError(f"cannot extract {label}: {_members_named(str(error), staging, label)}") from None
        raise


def _dataset_root(folder: Path) -> Path:
    """``folder``, or its only sub-folder when that one wraps the class folders (``data/<class>/<image>``)."""
    visible = [entry for entry in folder.iterdir() if _visible(entry.name)]
    if len(visible) == 1 and visible[0].is_dir():
        inner = [entry for entry in visible[0].iterdir() if _visible(entry.name)]
        if any(entry.is_dir() for entry in inner) and not any(
            entry.is_file() and entry.suffix.lower() in IMAGE_EXTENSIONS for entry in inner
        ):
            return visible[0]
    return folder


def load_image_zip(
    source: str | os.PathLike | bytes,
    *,
    name: str | None = None,
    max_bytes: int = MAX_ZIP_BYTES,
    max_entries: int = MAX_ZIP_ENTRIES,
    progress: Progress | None = None,
) -> ImageSet:
    """An ``ImageSet`` from a zip of an image folder (a path or the uploaded bytes).

    The archive is checked before anything is written (``_checked_entries``) and extracted once into
    ``cache_dir("datasets")/zip/<sha256 of the archive>`` with a manifest of every file's size and SHA-256;
    a later load verifies the folder against it and extracts again on any difference. The class folders may
    sit at the top level or inside a single wrapping folder. Then it loads as ``load_image_folder``. Refused
    work leaves nothing in the cache: an archive refused before extraction writes nothing, and an extracted
    folder whose images cannot be loaded is removed.
    """
    if isinstance(source, bytes):
        label, data = f"zip archive {name or ''}".strip(), source
    else:
        path = Path(source).expanduser()
        label = f"zip archive {path}"
        try:
            if path.stat().st_size > max_bytes:
                raise DatasetError(f"{label} is larger than the limit of {size_in_words(max_bytes)}")
            data = path.read_bytes()
        except OSError as error:
            raise DatasetError(f"cannot read {label}: {error.strerror or error}") from None
        name = name or path.stem
    target = paths.cache_dir("datasets/zip") / hashlib.sha256(data).hexdigest()
    if target.exists() and not (target.is_dir() and cache.manifest_matches(target)):
        cache.move_aside(target)  # damaged (a file deleted or edited) or not a folder: extract again
    if not target.is_dir():
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, OSError, ValueError) as error:
            raise DatasetError(f"{label} is not a valid zip file ({error})") from None
        with archive:
            entries = _checked_entries(archive, label, len(data), max_bytes, max_entries)
            progress = _with_estimate(progress, len(entries))
            _extract(archive, entries, target, label, max_bytes, progress)
    try:
        return load_image_folder(_dataset_root(target), name=name or "upload", progress=progress)
    except DatasetError as error:  # the same archive would be refused again: keep none of it; the archive's
        # members by their names in it, never the cache folder's path
        shutil.rmtree(target, ignore_errors=True)
        raise DatasetError(_members_named(str(error), target, label)) from None


#: Files of an image zip extracted, listed and decoded per second on a 2-core machine (100,000 tiny images took
#: 3-4 min; 20,000 of 8x8 pixels 30 s on a busy one): the estimate said with a large zip's progress.
ZIP_FILES_PER_S = 600


def _with_estimate(progress: Progress | None, n_files: int) -> Progress | None:
    """``progress`` whose every message also says how long a zip of ``n_files`` takes (from 6,000 files,
    about 10 s, on: the app's progress text and the CLI's bar show it from the start)."""
    if progress is None or n_files < 10 * ZIP_FILES_PER_S:
        return progress
    note = f"{n_files:,} files take {duration_words(n_files / ZIP_FILES_PER_S)} ({ZIP_FILES_PER_S} files/s)"
    report(progress, 0, n_files, f"extracting: {note}")
    return lambda done, total, message: progress(done, total, f"{message}; {note}")


def _members_named(message: str, folder: Path, label: str) -> str:
    """``message`` with the paths under ``folder`` (an extraction, in the cache or a temporary folder) as the
    paths inside the archive ``label``, which it names."""
    shown = message.replace(f"{folder}{os.sep}", "").replace(str(folder), label)
    return shown if shown == message or label in shown else f"{shown} (in {label})"


# -------------------------------------------------------------------------------------------------------- npz


def _as_uint8_images(x: np.ndarray, label: str) -> np.ndarray:
    """``x`` (N, H, W) or (N, H, W, C), C in {1, 3}: uint8 as is, other integers in 0..255,
    floats in [0, 1] scaled by 255 and rounded; anything else is refused."""
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3):
        hint = " (channels must be last: N, H, W, C)" if x.ndim == 4 and x.shape[1] in (1, 3) else ""
        raise DatasetError(f"{label}: x must have shape (N, H, W) or (N, H, W, C) with C = 1 or 3, got {x.shape}{hint}")
    if x.dtype == np.uint8:
        return x
    if x.dtype.kind in "iu":
        if x.size and (x.min() < 0 or x.max() > 255):
            raise DatasetError(f"{label}: integer pixels must lie in 0..255, found {x.min()}..{x.max()}")
        return x.astype(np.uint8)
    if x.dtype.kind == "f":
        if not np.isfinite(x).all():
            raise DatasetError(f"{label}: x contains NaN or infinite values")
        if x.size and (x.min() < 0 or x.max() > 1):
            raise DatasetError(
                f"{label}: float pixels must lie in [0, 1], found {x.min():g}..{x.max():g}; "
                "store uint8 0..255 or divide by 255"
            )
        return np.rint(x * 255).astype(np.uint8)
    raise DatasetError(f"{label}: x must be uint8 or float, got {x.dtype}")


def load_npz_dataset(source: str | os.PathLike | bytes, *, name: str | None = None) -> ImageSet:
    """An ``ImageSet`` from an npz with ``x`` (N, H, W[, C]) uint8 or float in [0, 1], ``y`` (N,) int labels,
    and optionally ``class_names`` (strings; default ``"0" .. str(max(y))``). Read with ``allow_pickle=False``."""
    if isinstance(source, bytes):
        label = f"npz file {name or ''}".strip()
    else:
        source = Path(source).expanduser()
        label, name = f"npz file {source}", name or source.stem

    def same_rows(declared: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
        """y's rows against x's, from the headers: a small file whose y or x inflates alone is never read."""
        x_shape, y_shape = (declared.get(key, ((),))[0] for key in ("x", "y"))
        if x_shape and y_shape and x_shape[0] != y_shape[0]:
            raise DatasetError(f"{label}: y has {y_shape[0]} labels but x has {x_shape[0]} images")

    arrays = load_npz_arrays(source, ("x", "y"), ("class_names",), label=label, check_declared=same_rows)
    images = _as_uint8_images(arrays["x"], label)
    labels = arrays["y"]
    if labels.dtype.kind not in "iu" or labels.ndim != 1:
        raise DatasetError(f"{label}: y must be a 1-D integer array, got {labels.dtype} {labels.shape}")
    if labels.size and labels.min() < 0:
        raise DatasetError(f"{label}: labels must be non-negative, found {labels.min()}")
    if "class_names" in arrays:
        names = arrays["class_names"]
        if names.dtype.kind not in "US" or names.ndim != 1:
            raise DatasetError(f"{label}: class_names must be a 1-D array of strings, got {names.dtype} {names.shape}")
        class_names = tuple(n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n) for n in names.tolist())
    else:
        class_names = tuple(str(k) for k in range(int(labels.max()) + 1 if labels.size else 0))
    return ImageSet(name or "upload", images, labels.astype(np.int64), class_names)
