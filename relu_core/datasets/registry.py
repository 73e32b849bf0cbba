"""The registered data sets: where each one is looked for, how it is read, and how it is downloaded.

Search order for every set: ``cache_dir("datasets")`` (where downloads land), then ``paths.data_dirs()``
(the cache root and ``$RELU_STUDIO_DATA``), then fixed system folders (Debian's Fashion-MNIST package).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from relu_core import paths
from relu_core.datasets.base import DatasetError
from relu_core.datasets.formats import load_npz_arrays, read_idx, read_plain_pickle
from relu_core.datasets.generated import DEAD_LEAVES_CLASSES, dead_leaves
from relu_core.datasets.userdata import read_image_folder
from relu_core.progress import Progress
from relu_core.registry import by_name

Arrays = tuple[np.ndarray, np.ndarray, tuple[str, ...]]
"""Images uint8 (N, H, W, C), labels (N,), class names."""

DIGITS_SEED = 0
"""Seed of the stratified 50/50 train/test split of scikit-learn's digits (899 test, 898 train images)."""

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
DIGIT_CLASSES = tuple(str(k) for k in range(10))
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
_CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Source:
    """A data set split found on this machine: where it is and how to read it."""

    location: str
    read: Callable[[Progress | None], Arrays]


@dataclass(frozen=True)
class RegisteredDataset:
    """One entry of ``DATASETS``.

    ``find(split)`` returns the first local source (or None) and every place it looked, for the error
    message; ``fetch(root, split)`` downloads through torchvision into ``root`` (None: not downloadable);
    ``url(split)`` is the server ``fetch`` contacts first (checked before downloading, for a fast offline error).
    """

    name: str
    description: str
    splits: tuple[str, ...]
    #: (height, width, channels) of its images, as ``ImageSet.images.shape[1:]``.
    image_shape: tuple[int, int, int]
    find: Callable[[str], tuple[Source | None, list[str]]]
    fetch: Callable[[Path, str], None] | None = None
    url: Callable[[str], str] | None = None


def _roots() -> list[Path]:
    roots: list[Path] = []
    for root in (paths.cache_dir("datasets"), *paths.data_dirs()):
        if root not in roots:
            roots.append(root)
    return roots


# ------------------------------------------------------------------------------------------ scikit-learn digits


def _read_digits(split: str) -> Arrays:
    """scikit-learn's 1,797 digits, 8x8 grey: values 0..16 rescaled to 0..255 (x * 255 / 16, rounded), then
    a stratified 50/50 split seeded with ``DIGITS_SEED``, each part kept in the original order."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    labels = bunch.target.astype(np.int64)
    train, test = train_test_split(np.arange(labels.size), test_size=0.5, stratify=labels, random_state=DIGITS_SEED)
    index = np.sort(train if split == "train" else test)
    return np.ascontiguousarray(images[index]), labels[index], DIGIT_CLASSES


def _find_digits(split: str) -> tuple[Source | None, list[str]]:
    return Source("scikit-learn (bundled with the package)", lambda progress: _read_digits(split)), []


# ---------------------------------------------------------------------------------- MNIST-style idx files


def _idx_file(folder: Path, stem: str) -> Path | None:
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    return None


def _read_idx_pair(images_file: Path, labels_file: Path, class_names: tuple[str, ...]) -> Arrays:
    images, labels = read_idx(images_file), read_idx(labels_file)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DatasetError(f"{images_file} {images.shape} and {labels_file} {labels.shape} do not match")
    return images[..., None], labels.astype(np.int64), class_names


def _idx_finder(
    folders: tuple[str, ...], system_folders: tuple[Path, ...], class_names: tuple[str, ...]
) -> Callable[[str], tuple[Source | None, list[str]]]:
    """Look for ``{t10k,train}-{images-idx3,labels-idx1}-ubyte[.gz]`` in ``<root>/<folder>``."""

    def find(split: str) -> tuple[Source | None, list[str]]:
        prefix = "t10k" if split == "test" else "train"
        searched = []
        for folder in [root / name for root in _roots() for name in folders] + list(system_folders):
            searched.append(str(folder))
            images_file = _idx_file(folder, f"{prefix}-images-idx3-ubyte")
            labels_file = _idx_file(folder, f"{prefix}-labels-idx1-ubyte")
            if images_file and labels_file:
                return Source(
                    str(folder), lambda progress: _read_idx_pair(images_file, labels_file, class_names)
                ), searched
        return None, searched

    return find


# --------------------------------------------------------------------------------------------- CIFAR, SVHN


def _cifar_names(meta_file: Path, key: str, default: tuple[str, ...] | None) -> tuple[str, ...]:
    """Class names from an official CIFAR metadata pickle (read with the restricted unpickler)."""
    if not meta_file.is_file():
        if default is None:
            raise DatasetError(f"class names file {meta_file} is missing")
        return default
    names = read_plain_pickle(meta_file).get(key)
    if not names:
        raise DatasetError(f"{meta_file} has no {key!r} list")
    return tuple(names)


def _read_torchvision(kind: str, root: Path, split: str) -> Arrays:
    """Read a torchvision layout with torchvision itself, which checks every file's md5 against the
    official one before unpickling it (so only the genuine CIFAR pickles are ever loaded)."""
    import torchvision.datasets as tv

    try:
        if kind == "SVHN":
            data = tv.SVHN(str(root), split=split, download=False)
            return (
                np.ascontiguousarray(data.data.transpose(0, 2, 3, 1)),
                np.asarray(data.labels, np.int64),
                DIGIT_CLASSES,
            )
        data = getattr(tv, kind)(str(root), train=split == "train", download=False)
    except RuntimeError as error:
        raise DatasetError(f"{root}: {error} (torchvision's md5 check failed)") from None
    return np.ascontiguousarray(data.data), np.asarray(data.targets, np.int64), tuple(data.classes)


def _torchvision_finder(
    kind: str,
    marker: Callable[[str], str],
    parents: tuple[str, ...],
    fallback: Callable[[str], tuple[Source | None, list[str]]] | None = None,
) -> Callable[[str], tuple[Source | None, list[str]]]:
    """Look for the torchvision layout of class ``kind`` in ``<root>/<parent>``: the folder or file named
    ``marker(split)`` (``cifar-10-batches-py``, ``test_32x32.mat``, ...); then ask ``fallback``."""

    def find(split: str) -> tuple[Source | None, list[str]]:
        searched = []
        for base in [root / parent for root in _roots() for parent in parents]:
            location = base / marker(split)
            searched.append(str(location))
            if location.exists():
                return Source(str(location), lambda progress: _read_torchvision(kind, base, split)), searched
        if fallback is None:
            return None, searched
        source, more = fallback(split)
        return source, searched + more

    return find


#: The JPEG folders of the shared data (quality 75, one encoding for both): ``<class>/<k>.jpg``, ``k`` the k-th image
#: of that class in the official order (``test_jpeg_q75``: 10,000 test images; ``train_jpeg_q75``: 50,000 training
#: images, none byte-identical to a test image). A model trained on one and tested on the other sees one domain.
CIFAR10_JPEG_FOLDERS = {"test": "test_jpeg_q75", "train": "train_jpeg_q75"}


def _read_cifar10_jpeg(folder: Path, progress: Progress | None) -> Arrays:
    """A CIFAR-10 JPEG folder (test or training split): labels follow the official class order
    (``batches.meta``), whatever the order of the folder names; images are ordered by class, then by their index
    within the class (zero-padded file names, so the sorted names are that order). Decoded once, then read from
    the content-addressed cache (:func:`relu_core.datasets.userdata.read_image_folder`)."""
    images, folder_labels, folder_names = read_image_folder(folder, progress)
    class_names = _cifar_names(folder.parent / "batches.meta", "label_names", CIFAR10_CLASSES)
    unknown = sorted(set(folder_names) - set(class_names))
    if unknown:
        raise DatasetError(f"{folder} has class folders that are not CIFAR-10 classes: {', '.join(unknown)}")
    official = np.array([class_names.index(name) for name in folder_names], dtype=np.int64)
    return images, official[folder_labels], class_names


def _find_cifar10_jpeg(split: str) -> tuple[Source | None, list[str]]:
    searched = []
    for root in _roots():
        folder = root / "cifar10" / CIFAR10_JPEG_FOLDERS[split]
        searched.append(str(folder))
        if folder.is_dir():
            return Source(str(folder), lambda progress: _read_cifar10_jpeg(folder, progress)), searched
    return None, searched


def _exact_finder(
    folder: str, npz_name: str, meta_name: str, key: str, default: tuple[str, ...] | None
) -> Callable[[str], tuple[Source | None, list[str]]]:
    """The pixel-exact npz prefixes of the official test sets (``x`` uint8 NHWC, ``y``), names from the meta."""

    def read(npz_file: Path) -> Arrays:
        arrays = load_npz_arrays(npz_file, ("x", "y"), label=str(npz_file))
        return arrays["x"], arrays["y"].astype(np.int64), _cifar_names(npz_file.parent / meta_name, key, default)

    def find(split: str) -> tuple[Source | None, list[str]]:
        if split != "test":  # a prefix of the test set: it has no training split, never serve it as one
            return None, [f"{folder}/{npz_name} (test images only)"]
        searched = []
        for root in _roots():
            npz_file = root / folder / npz_name
            searched.append(str(npz_file))
            if npz_file.is_file() and (default is not None or (npz_file.parent / meta_name).is_file()):
                return Source(str(npz_file), lambda progress: read(npz_file)), searched
        return None, searched

    return find


def _find_dead_leaves(split: str) -> tuple[Source | None, list[str]]:
    """The generated dead-leaves images: always here (drawn once, then cached); one class, "dead leaves"."""

    def read(progress: Progress | None) -> Arrays:
        images = dead_leaves(split, progress)
        return images, np.zeros(len(images), np.int64), DEAD_LEAVES_CLASSES

    return Source("generated (relu_core.datasets.generated, seeded)", read), []


def _torchvision_fetch(kind: str, subfolder: str = "") -> Callable[[Path, str], None]:
    def fetch(root: Path, split: str) -> None:
        import torchvision.datasets as tv

        if kind == "SVHN":
            tv.SVHN(str(root / subfolder), split=split, download=True)
        else:
            getattr(tv, kind)(str(root / subfolder), train=split == "train", download=True)

    return fetch


def _torchvision_url(kind: str) -> Callable[[str], str]:
    def url(split: str) -> str:
        import torchvision.datasets as tv

        cls = getattr(tv, kind)
        if kind == "SVHN":
            return cls.split_list[split][0]
        return cls.mirrors[0] if hasattr(cls, "mirrors") else cls.url

    return url


def check_connection(url: str, name: str) -> None:
    """Raise DatasetError quickly when the download server of ``url`` cannot be reached."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise DatasetError(
            f"could not download {name}: no internet connection ({parts.hostname}: {error.strerror or error})"
        ) from None


TRAIN_TEST = ("test", "train")

DATASETS: dict[str, RegisteredDataset] = by_name(
    RegisteredDataset(
        "digits",
        "scikit-learn digits: 1,797 8x8 grey images of 0-9, seeded 50/50 split (always offline)",
        TRAIN_TEST,
        (8, 8, 1),
        _find_digits,
    ),
    RegisteredDataset(
        "mnist",
        "MNIST handwritten digits, 28x28 grey, 10 classes (10,000 test, 60,000 train)",
        TRAIN_TEST,
        (28, 28, 1),
        _idx_finder(("MNIST/raw", "mnist"), (), DIGIT_CLASSES),
        _torchvision_fetch("MNIST"),
        _torchvision_url("MNIST"),
    ),
    RegisteredDataset(
        "fashion-mnist",
        "Fashion-MNIST clothing, 28x28 grey, 10 classes (10,000 test, 60,000 train)",
        TRAIN_TEST,
        (28, 28, 1),
        _idx_finder(("FashionMNIST/raw", "fashion-mnist"), (DEBIAN_FASHION_MNIST,), FASHION_MNIST_CLASSES),
        _torchvision_fetch("FashionMNIST"),
        _torchvision_url("FashionMNIST"),
    ),
    RegisteredDataset(
        "cifar10",
        "CIFAR-10, 32x32 RGB, 10 classes (torchvision files, or the JPEG folders, quality 75: 50,000 train, 10,000 test)",
        TRAIN_TEST,
        (32, 32, 3),
        _torchvision_finder("CIFAR10", lambda split: "cifar-10-batches-py", ("", "cifar10"), _find_cifar10_jpeg),
        _torchvision_fetch("CIFAR10"),
        _torchvision_url("CIFAR10"),
    ),
    RegisteredDataset(
        "cifar10-exact",
        "CIFAR-10 test set, first 1,017 images, pixel-exact",
        ("test",),
        (32, 32, 3),
        _exact_finder(
            "cifar10", "cifar10_test_lossless_prefix1017.npz", "batches.meta", "label_names", CIFAR10_CLASSES
        ),
    ),
    RegisteredDataset(
        "cifar100",
        "CIFAR-100, 32x32 RGB, 100 fine classes",
        TRAIN_TEST,
        (32, 32, 3),
        _torchvision_finder("CIFAR100", lambda split: "cifar-100-python", ("", "cifar100")),
        _torchvision_fetch("CIFAR100"),
        _torchvision_url("CIFAR100"),
    ),
    RegisteredDataset(
        "cifar100-exact",
        "CIFAR-100 test set, first 916 images, pixel-exact, fine labels",
        ("test",),
        (32, 32, 3),
        _exact_finder("cifar100", "cifar100_test_lossless_prefix916.npz", "meta", "fine_label_names", None),
    ),
    RegisteredDataset(
        "svhn",
        "SVHN house numbers, 32x32 RGB, 10 classes (26,032 test, 73,257 train)",
        TRAIN_TEST,
        (32, 32, 3),
        _torchvision_finder("SVHN", lambda split: f"{split}_32x32.mat", ("svhn", "SVHN")),
        _torchvision_fetch("SVHN", "svhn"),
        _torchvision_url("SVHN"),
    ),
    RegisteredDataset(
        "dead-leaves",
        "generated dead-leaves images (random discs), 32x32 RGB, one class, 50,000 train / 10,000 test: OpenMix's "
        "outliers for CIFAR-10 (always offline)",
        TRAIN_TEST,
        (32, 32, 3),
        _find_dead_leaves,
    ),
)
