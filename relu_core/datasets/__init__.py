"""Data sets for Rel-U Studio: a registry of standard sets and loaders for user data.

``load_dataset(spec)`` returns an ``ImageSet`` (uint8 NHWC images, int64 labels, class names and a content
fingerprint). ``spec`` is a registered name (``DATASETS``: digits, mnist, fashion-mnist, cifar10,
cifar10-exact, cifar100, cifar100-exact, svhn) or user data: ``imagefolder:PATH`` (``<class>/<image>``),
``zip:PATH`` (such a folder zipped) or ``npz:PATH`` (``x``, ``y``, optional ``class_names``). Registered sets
are looked for locally (see ``registry``) and downloaded through torchvision only when asked
(``download=True``). Every failure raises ``DatasetError`` (an ``InputError``) with a one-line message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relu_core import paths
from relu_core.datasets.base import DatasetError, ImageSet, image_fingerprint
from relu_core.datasets.registry import DATASETS, DIGITS_SEED, RegisteredDataset, check_connection
from relu_core.datasets.userdata import (
    IMAGE_EXTENSIONS,
    MAX_ZIP_BYTES,
    MAX_ZIP_ENTRIES,
    load_image_folder,
    load_image_zip,
    load_npz_dataset,
)
from relu_core.progress import Progress, report

__all__ = [
    "DATASETS",
    "DIGITS_SEED",
    "IMAGE_EXTENSIONS",
    "MAX_ZIP_BYTES",
    "MAX_ZIP_ENTRIES",
    "USER_SPEC_PREFIXES",
    "DatasetError",
    "DatasetInfo",
    "ImageSet",
    "RegisteredDataset",
    "image_fingerprint",
    "list_datasets",
    "load_dataset",
    "load_image_folder",
    "load_image_zip",
    "load_npz_dataset",
    "load_uploaded_dataset",
]

USER_SPEC_PREFIXES = ("imagefolder:", "zip:", "npz:")


@dataclass(frozen=True)
class DatasetInfo:
    """A registered data set as ``list_datasets`` describes it.

    ``available``: its test split is on this machine (``location`` says where; None when absent);
    ``downloadable``: ``load_dataset(name, download=True)`` can fetch it; ``image_shape``: (height, width,
    channels) of its images.
    """

    name: str
    description: str
    available: bool
    location: str | None
    splits: tuple[str, ...]
    downloadable: bool
    image_shape: tuple[int, int, int]


def list_datasets() -> list[DatasetInfo]:
    """Every registered data set, in registry order, with where its test split was found."""
    infos = []
    for entry in DATASETS.values():
        source, _ = entry.find("test")
        infos.append(
            DatasetInfo(
                entry.name,
                entry.description,
                source is not None,
                source.location if source else None,
                entry.splits,
                entry.fetch is not None,
                entry.image_shape,
            )
        )
    return infos


def _download(entry: RegisteredDataset, split: str, progress: Progress | None) -> None:
    """Fetch ``entry`` with torchvision into ``cache_dir("datasets")``; a fast, clear error when offline."""
    assert entry.fetch is not None and entry.url is not None
    check_connection(entry.url(split), entry.name)
    report(progress, 0, 1, f"downloading {entry.name} ({split})")
    try:
        entry.fetch(paths.cache_dir("datasets"), split)
    except OSError as error:  # urllib's URLError, socket errors, a full disk
        raise DatasetError(
            f"could not download {entry.name}: no internet connection or a server error ({error})"
        ) from None
    except RuntimeError as error:  # torchvision: every mirror failed, or a wrong md5
        message = " ".join(str(error).split())
        raise DatasetError(f"could not download {entry.name}: {message}") from None
    report(progress, 1, 1, f"downloaded {entry.name} ({split})")


def _load_registered(entry: RegisteredDataset, split: str, download: bool, progress: Progress | None) -> ImageSet:
    if split not in entry.splits:
        raise DatasetError(f"{entry.name} has no split {split!r}; choose {' or '.join(entry.splits)}")
    source, searched = entry.find(split)
    if source is None and download:
        if entry.fetch is None:
            raise DatasetError(f"{entry.name} cannot be downloaded and was not found; searched: {', '.join(searched)}")
        _download(entry, split, progress)
        source, searched = entry.find(split)
    if source is None:
        how = (
            (
                "download it with load_dataset(..., download=True) (CLI: --download; app: the download button), "
                "or set RELU_STUDIO_DATA to a folder that holds it"
            )
            if entry.fetch
            else "set RELU_STUDIO_DATA to a folder that holds it (it cannot be downloaded)"
        )
        raise DatasetError(f"data set {entry.name} ({split} split) not found; searched: {', '.join(searched)}; {how}")
    images, labels, class_names = source.read(progress)
    return ImageSet(f"{entry.name}-{split}", images, labels, class_names)


def load_dataset(spec: str, split: str = "test", download: bool = False, progress: Progress | None = None) -> ImageSet:
    """Load a registered data set split (``"test"`` or ``"train"``) or user data (``imagefolder:PATH``,
    ``zip:PATH``, ``npz:PATH``; these have a single split, ``"test"``).

    ``download=True`` fetches a registered set that is not found locally (torchvision, into
    ``cache_dir("datasets")``). ``progress(done, total, message)`` is called during slow steps (downloads,
    zip extraction, decoding image folders). The returned set is named ``<name>-<split>`` for registered
    sets and after the folder or file otherwise.
    """
    spec = spec.strip()
    if spec in DATASETS:
        return _load_registered(DATASETS[spec], split, download, progress)
    kind, _, path = spec.partition(":")
    if f"{kind}:" not in USER_SPEC_PREFIXES or not path:
        raise DatasetError(
            f"unknown data set {spec!r}: choose one of {', '.join(DATASETS)}, or imagefolder:PATH, zip:PATH, npz:PATH"
        )
    if split != "test":
        raise DatasetError(f"{spec} is user data with a single split; use split='test'")
    if kind == "imagefolder":
        return load_image_folder(path, progress=progress)
    if kind == "zip":
        return load_image_zip(path, progress=progress)
    return load_npz_dataset(path)


def load_uploaded_dataset(data: bytes, filename: str, progress: Progress | None = None) -> ImageSet:
    """An uploaded file as an ``ImageSet``: a ``.zip`` of an image folder or an ``.npz`` (by extension)."""
    suffix, name = Path(filename).suffix.lower(), Path(filename).stem or "upload"
    if suffix == ".zip":
        return load_image_zip(data, name=name, progress=progress)
    if suffix == ".npz":
        return load_npz_dataset(data, name=name)
    raise DatasetError(
        f"cannot load {filename!r}: upload a .zip of an image folder (<class>/<image>) or an .npz with x and y"
    )
