"""Tests for relu_core.datasets on the real shared data and on small folders, zips and npz files made here."""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import pickle
import stat
import zipfile
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
from PIL import Image

import relu_core.datasets as ds
from relu_core import paths
from relu_core.datasets import DATASETS, DatasetError, ImageSet, load_dataset, load_uploaded_dataset, registry, userdata
from relu_core.datasets.formats import read_plain_pickle
from relu_core.errors import InputError

CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


# ------------------------------------------------------------------------------------------------- helpers


def write_folder(root: Path, grey: bool = False, size: tuple[int, int] = (5, 4)) -> dict[str, list[np.ndarray]]:
    """Two classes ('cat', 'dog') of PNG images with known pixels; returns the pixels per class in file order."""
    rng = np.random.default_rng(0)
    pixels: dict[str, list[np.ndarray]] = {}
    for class_name, count in (("dog", 2), ("cat", 3)):  # written out of order: loading must sort
        (root / class_name).mkdir(parents=True)
        pixels[class_name] = []
        for k in range(count):
            shape = (size[1], size[0]) if grey else (size[1], size[0], 3)
            array = rng.integers(0, 256, shape, dtype=np.uint8)
            Image.fromarray(array).save(root / class_name / f"img{k}.png")
            pixels[class_name].append(array)
    (root / "cat" / ".DS_Store").write_bytes(b"junk")  # hidden files and non-images are skipped
    (root / "dog" / "notes.txt").write_text("not an image")
    return pixels


def zip_folder(root: Path, prefix: str = "") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, prefix + path.relative_to(root).as_posix())
    return buffer.getvalue()


def zip_with(entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return buffer.getvalue()


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------------- ImageSet


def test_imageset_fingerprint_tracks_content_and_arrays_are_read_only():
    images = np.zeros((4, 2, 2, 3), np.uint8)
    labels = np.array([0, 1, 0, 1])
    base = ImageSet("a", images.copy(), labels, ("x", "y"))
    assert base.labels.dtype == np.int64 and len(base) == 4 and base.num_classes == 2
    assert ImageSet("other name", images.copy(), labels, ("x", "y")).fingerprint == base.fingerprint
    changed = images.copy()
    changed[3, 1, 1, 2] = 1
    assert ImageSet("a", changed, labels, ("x", "y")).fingerprint != base.fingerprint
    assert ImageSet("a", images.copy(), labels[::-1].copy(), ("x", "y")).fingerprint != base.fingerprint
    assert ImageSet("a", images.copy(), labels, ("x", "z")).fingerprint != base.fingerprint
    assert ImageSet("a", images.reshape(4, 1, 4, 3).copy(), labels, ("x", "y")).fingerprint != base.fingerprint
    with pytest.raises(ValueError):
        base.images[0, 0, 0, 0] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.name = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    "images, labels, names, message",
    [
        (np.zeros((2, 2, 2, 3), np.float32), [0, 1], ("a", "b"), "uint8"),
        (np.zeros((2, 2, 2, 4), np.uint8), [0, 1], ("a", "b"), "1 or 3 channels"),
        (np.zeros((2, 2, 2, 3), np.uint8), [0], ("a", "b"), "labels must be integers"),
        (np.zeros((2, 2, 2, 3), np.uint8), [0, 2], ("a", "b"), "0..1"),
    ],
)
def test_imageset_validates(images, labels, names, message):
    with pytest.raises(DatasetError, match=message):
        ImageSet("bad", images, np.asarray(labels), names)


# ------------------------------------------------------------------------------------------------- registry


def test_digits_split_is_seeded_stratified_and_rescaled():
    from sklearn.datasets import load_digits

    test, train = load_dataset("digits"), load_dataset("digits", split="train")
    assert test.images.shape == (899, 8, 8, 1) and train.images.shape == (898, 8, 8, 1)
    assert test.images.dtype == np.uint8 and test.labels.dtype == np.int64
    assert test.class_names == tuple("0123456789") and test.name == "digits-test"
    assert load_dataset("digits").fingerprint == test.fingerprint  # deterministic
    assert test.fingerprint != train.fingerprint
    assert np.abs(np.bincount(test.labels) - np.bincount(train.labels)).max() <= 1  # stratified
    # the two halves are exactly scikit-learn's images, rescaled 0..16 -> 0..255 with rounding
    expected = np.rint(load_digits().images * 255 / 16).astype(np.uint8).reshape(1797, -1)
    got = np.concatenate([test.images, train.images]).reshape(1797, -1)
    assert got.max() == 255 and set(np.unique(got)) <= set(np.rint(np.arange(17) * 255 / 16).astype(int))
    order = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731 - sort rows for a multiset comparison
    np.testing.assert_array_equal(order(got), order(expected))


@pytest.mark.parametrize(
    "name, first_labels, names",
    [
        ("mnist", [7, 2, 1, 0, 4, 1, 4, 9], tuple("0123456789")),
        (
            "fashion-mnist",
            [9, 2, 1, 1, 6, 1, 4, 6],
            ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
        ),
    ],
)
def test_mnist_family_test_split(shared_data, name, first_labels, names):
    data = load_dataset(name)
    assert data.images.shape == (10000, 28, 28, 1) and data.images.dtype == np.uint8
    assert data.labels.tolist()[:8] == first_labels and set(data.labels.tolist()) == set(range(10))
    assert data.class_names == names
    assert 20 < data.images.mean() < 100 and data.images.max() == 255


def test_fashion_mnist_train_split(shared_data):
    data = load_dataset("fashion-mnist", split="train")
    assert data.images.shape == (60000, 28, 28, 1)
    assert np.bincount(data.labels).tolist() == [6000] * 10


@pytest.mark.slow
def test_cifar10_jpeg_folder_matches_the_exact_images(shared_data, monkeypatch):
    calls = []
    data = load_dataset("cifar10", progress=lambda done, total, message: calls.append((done, total)))
    assert data.images.shape == (10000, 32, 32, 3) and data.class_names == CIFAR10_NAMES
    assert np.bincount(data.labels).tolist() == [1000] * 10
    exact = load_dataset("cifar10-exact")
    assert exact.images.shape == (1017, 32, 32, 3) and exact.class_names == CIFAR10_NAMES
    # the JPEG folder holds <class>/<k>.jpg, k = rank within the class in the official order
    y_all = np.load(shared_data / "cifar10" / "cifar10_test_lossless_prefix1017.npz")["y_all"]
    np.testing.assert_array_equal(exact.labels, y_all[:1017])
    rank = np.array([(y_all[:i] == y_all[i]).sum() for i in range(1017)])
    position = y_all[:1017] * 1000 + rank
    np.testing.assert_array_equal(data.labels[position], exact.labels)
    difference = np.abs(data.images[position].astype(int) - exact.images).mean()
    assert 1 < difference < 12  # JPEG quality 75: close but not exact

    def must_not_decode(*args, **kwargs):
        raise AssertionError("the decoded npz cache should have been used")

    monkeypatch.setattr(userdata, "_decode_images", must_not_decode)
    again = load_dataset("cifar10")  # decoded once, then read from the npz cache
    assert again.fingerprint == data.fingerprint
    if calls:  # first decoding in this session reports progress up to the total
        assert calls[-1] == (10000, 10000)


def test_cifar100_exact(shared_data):
    data = load_dataset("cifar100-exact")
    assert data.images.shape == (916, 32, 32, 3) and len(data.class_names) == 100
    assert data.class_names[:3] == ("apple", "aquarium_fish", "baby") and data.class_names[-1] == "worm"
    np.testing.assert_array_equal(
        data.labels, np.load(shared_data / "cifar100" / "cifar100_test_lossless_prefix916.npz")["y"]
    )


def test_list_datasets_reports_local_copies(shared_data):
    infos = {info.name: info for info in ds.list_datasets()}
    assert (
        list(infos)
        == list(DATASETS)
        == [
            "digits",
            "mnist",
            "fashion-mnist",
            "cifar10",
            "cifar10-exact",
            "cifar100",
            "cifar100-exact",
            "svhn",
            "dead-leaves",
        ]
    )
    assert infos["digits"].available and not infos["digits"].downloadable
    assert infos["mnist"].available and Path(infos["mnist"].location) == shared_data / "mnist"
    assert infos["cifar10"].location == str(shared_data / "cifar10" / "test_jpeg_q75")
    assert infos["svhn"].downloadable and infos["cifar10-exact"].splits == ("test",)


def test_unknown_spec_and_split():
    with pytest.raises(DatasetError, match="unknown data set 'cifar11'.*digits, mnist, fashion-mnist.*npz:PATH"):
        load_dataset("cifar11")
    with pytest.raises(DatasetError, match="no split 'validation'"):
        load_dataset("digits", split="validation")
    with pytest.raises(InputError, match="single split"):
        load_dataset("npz:/nowhere.npz", split="train")


def test_missing_set_names_places_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))
    # Debian's dataset-fashion-mnist may be installed on this machine: the search must still miss it here.
    real_idx_file = registry._idx_file
    monkeypatch.setattr(
        registry,
        "_idx_file",
        lambda folder, stem: None if str(folder).startswith("/usr/share") else real_idx_file(folder, stem),
    )
    with pytest.raises(DatasetError) as error:
        load_dataset("fashion-mnist", split="train")
    message = str(error.value)
    assert str(tmp_path / "fashion-mnist") in message and "/usr/share/datasets/fashion-mnist" in message
    assert "download=True" in message and "\n" not in message


def test_download_offline_gives_a_clear_error(monkeypatch):
    def unreachable(address, timeout=None):
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr("relu_core.datasets.registry.socket.create_connection", unreachable)
    with pytest.raises(DatasetError, match=r"could not download mnist: no internet connection \(ossci-datasets"):
        load_dataset("mnist", split="train", download=True)
    assert not (paths.cache_dir("datasets") / "MNIST").exists()


def test_download_failure_inside_torchvision_is_wrapped(monkeypatch):
    def failing_fetch(root, split):
        raise URLError("timed out")

    monkeypatch.setattr(ds, "check_connection", lambda url, name: None)
    monkeypatch.setitem(DATASETS, "svhn", dataclasses.replace(DATASETS["svhn"], fetch=failing_fetch))
    with pytest.raises(DatasetError, match="could not download svhn: .*timed out"):
        load_dataset("svhn", download=True)


def test_idx_files_in_torchvision_layout(tmp_path, monkeypatch):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    images = np.arange(3 * 28 * 28, dtype=np.uint32).astype(np.uint8).reshape(3, 28, 28)
    header = b"\x00\x00\x08\x03" + np.array([3, 28, 28], ">u4").tobytes()
    (raw / "train-images-idx3-ubyte").write_bytes(header + images.tobytes())
    with gzip.open(raw / "train-labels-idx1-ubyte.gz", "wb") as stream:
        stream.write(b"\x00\x00\x08\x01" + np.array([3], ">u4").tobytes() + bytes([4, 0, 9]))
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))
    data = load_dataset("fashion-mnist", split="train")
    np.testing.assert_array_equal(data.images[..., 0], images)
    assert data.labels.tolist() == [4, 0, 9]
    (raw / "train-images-idx3-ubyte").write_bytes(header + images.tobytes()[:-1])
    with pytest.raises(DatasetError, match="truncated or malformed"):
        load_dataset("fashion-mnist", split="train")


def test_torchvision_layout_with_wrong_files_is_refused(tmp_path, monkeypatch):
    (tmp_path / "cifar-100-python").mkdir()
    (tmp_path / "cifar-100-python" / "test").write_bytes(b"not the official pickle")
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))
    with pytest.raises(DatasetError, match="md5 check"):
        load_dataset("cifar100")


class _Hostile:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_hostile_metadata_pickle_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "cifar100"
    folder.mkdir()
    (folder / "cifar100_test_lossless_prefix916.npz").write_bytes(
        npz_bytes(x=np.zeros((2, 32, 32, 3), np.uint8), y=np.array([0, 1]))
    )
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))
    (folder / "meta").write_bytes(pickle.dumps({"fine_label_names": ["a", "b"]}, protocol=2))  # as the official
    assert load_dataset("cifar100-exact").class_names == ("a", "b")
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": [b"c", "d"], "n": 3}))
    assert load_dataset("cifar100-exact").class_names == ("c", "d")
    (folder / "meta").write_bytes(pickle.dumps({"fine_label_names": ["a", _Hostile()]}))
    with pytest.raises(DatasetError, match="refusing to load posix.system"):
        load_dataset("cifar100-exact")
    (folder / "meta").write_bytes(pickle.dumps(np.arange(3)))
    with pytest.raises(DatasetError, match="refusing"):
        read_plain_pickle(folder / "meta")


# ---------------------------------------------------------------------------------------------- image folders


def test_image_folder_sorts_classes_and_files(tmp_path):
    pixels = write_folder(tmp_path / "pets")
    data = load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    assert data.class_names == ("cat", "dog") and data.name == "pets"
    assert data.labels.tolist() == [0, 0, 0, 1, 1] and data.images.shape == (5, 4, 5, 3)
    np.testing.assert_array_equal(data.images, np.stack(pixels["cat"] + pixels["dog"]))


def test_image_folder_grey_mixed_and_cache(tmp_path):
    pixels = write_folder(tmp_path / "grey", grey=True)
    grey = load_dataset(f"imagefolder:{tmp_path / 'grey'}")
    assert grey.images.shape == (5, 4, 5, 1)
    np.testing.assert_array_equal(grey.images[..., 0], np.stack(pixels["cat"] + pixels["dog"]))
    assert len(list((paths.cache_dir("datasets") / "imagefolder").glob("*.npz"))) >= 1
    # an RGB image among grey ones: every image becomes RGB
    rgb = np.full((4, 5, 3), (10, 20, 30), np.uint8)
    Image.fromarray(rgb).save(tmp_path / "grey" / "dog" / "img9.png")
    mixed = load_dataset(f"imagefolder:{tmp_path / 'grey'}")
    assert mixed.images.shape == (6, 4, 5, 3) and mixed.fingerprint != grey.fingerprint
    np.testing.assert_array_equal(mixed.images[-1], rgb)
    np.testing.assert_array_equal(mixed.images[0], np.repeat(pixels["cat"][0][..., None], 3, axis=2))
    # an edited file (new size and mtime) is decoded again, not served from the cache
    Image.fromarray(np.zeros((4, 5, 3), np.uint8)).save(tmp_path / "grey" / "dog" / "img9.png")
    os.utime(tmp_path / "grey" / "dog" / "img9.png", ns=(1, 1))
    assert load_dataset(f"imagefolder:{tmp_path / 'grey'}").images[-1].max() == 0


def test_damaged_folder_cache_is_rebuilt(tmp_path):
    write_folder(tmp_path / "pets")
    first = load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    for cache_file in (paths.cache_dir("datasets") / "imagefolder").glob("*.npz"):
        cache_file.write_bytes(b"garbage")
    assert load_dataset(f"imagefolder:{tmp_path / 'pets'}").fingerprint == first.fingerprint


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            lambda root: Image.fromarray(np.zeros((9, 9, 3), np.uint8)).save(root / "dog" / "img7.png"),
            r"same size: .*img7.png is 9x9",
        ),
        (lambda root: (root / "dog" / "img8.png").write_bytes(b"\x89PNG broken"), r"cannot read image .*img8.png"),
        (lambda root: (root / "empty").mkdir(), r"class folder .*empty holds no images"),
    ],
)
def test_bad_image_folders(tmp_path, damage, message):
    write_folder(tmp_path / "pets")
    damage(tmp_path / "pets")
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"imagefolder:{tmp_path / 'pets'}")


def test_folder_without_classes_or_missing(tmp_path):
    with pytest.raises(DatasetError, match="no class folders"):
        load_dataset(f"imagefolder:{tmp_path}")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(f"imagefolder:{tmp_path / 'nowhere'}")


# ------------------------------------------------------------------------------------------------------ zips


@pytest.mark.parametrize("prefix", ["", "wrapped/"])
def test_zip_of_image_folder(tmp_path, prefix):
    write_folder(tmp_path / "pets")
    folder = load_dataset(f"imagefolder:{tmp_path / 'pets'}")
    archive = zip_folder(tmp_path / "pets", prefix)
    uploaded = load_uploaded_dataset(archive, "my pets.zip")
    assert uploaded.name == "my pets" and uploaded.class_names == ("cat", "dog")
    assert uploaded.fingerprint == folder.fingerprint
    (tmp_path / "pets.zip").write_bytes(archive)
    assert load_dataset(f"zip:{tmp_path / 'pets.zip'}").fingerprint == folder.fingerprint


def _symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("cat/link.png")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    "entries, message",
    [
        ([("/etc/cat/evil.png", b"x")], "absolute path"),
        ([("cat/../../evil.png", b"x")], r"'\.\.' entry"),
        ([("..\\evil.png", b"x")], r"'\.\.' entry"),
        ([("C:/cat/evil.png", b"x")], "absolute path"),
        ([(_symlink_entry(), b"/etc/passwd")], "symbolic link"),
        ([("cat/bomb.png", bytes(20_000))], "more than the limit of 9.8 KiB"),
        ([(f"cat/{k}.png", b"x") for k in range(6)], "more than the limit of 5"),
    ],
)
def test_hostile_zips_are_refused(entries, message):
    before = set(paths.cache_dir("datasets/zip").iterdir())
    with pytest.raises(DatasetError, match=message):
        ds.load_image_zip(zip_with(entries), name="evil", max_bytes=10_000, max_entries=5)
    assert set(paths.cache_dir("datasets/zip").iterdir()) == before  # nothing was extracted


def test_default_zip_limit_refuses_a_declared_bomb():
    """A 2 GiB entry (its central-directory size forged, so the test stays fast) is refused before extraction."""
    archive = bytearray(zip_with([("cat/huge.png", bytes(1000))]))
    central = archive.index(b"PK\x01\x02")
    archive[central + 24 : central + 28] = (2 << 30).to_bytes(4, "little")  # uncompressed size
    assert zipfile.ZipFile(io.BytesIO(bytes(archive))).infolist()[0].file_size == 2 << 30
    with pytest.raises(DatasetError, match="expands to 2,147,483,648 bytes, more than the limit of 1 GiB"):
        load_uploaded_dataset(bytes(archive), "bomb.zip")


def test_entry_larger_than_declared_is_cut_at_its_declared_size(tmp_path):
    """The opposite lie (a small declared size): extraction never writes more than declared, so the image
    is truncated and refused as unreadable instead of filling the disk."""
    png = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(png, format="PNG")
    archive = bytearray(zip_with([("cat/a.png", png.getvalue())]))
    central = archive.index(b"PK\x01\x02")
    archive[central + 24 : central + 28] = (10).to_bytes(4, "little")
    with pytest.raises(DatasetError, match="cannot (extract|read image)"):
        load_uploaded_dataset(bytes(archive), "liar.zip")


def test_not_a_zip_or_unknown_upload():
    with pytest.raises(DatasetError, match="not a valid zip"):
        load_uploaded_dataset(b"hello", "data.zip")
    with pytest.raises(DatasetError, match=r"upload a \.zip"):
        load_uploaded_dataset(b"hello", "data.csv")


# ------------------------------------------------------------------------------------------------------- npz


def test_npz_uint8_float_and_class_names(tmp_path):
    x = np.random.default_rng(1).integers(0, 256, (4, 6, 6), dtype=np.uint8)
    grey = load_uploaded_dataset(npz_bytes(x=x, y=np.array([0, 2, 1, 2])), "set.npz")
    assert grey.images.shape == (4, 6, 6, 1) and grey.class_names == ("0", "1", "2") and grey.name == "set"
    np.testing.assert_array_equal(grey.images[..., 0], x)
    values = np.array([0.0, 0.5, 1.0, 0.499 / 255, 1.501 / 255], np.float32)
    floats = np.repeat(values[:, None], 3, axis=1).reshape(1, 1, 5, 3)
    path = tmp_path / "floats.npz"
    path.write_bytes(npz_bytes(x=floats, y=np.array([1]), class_names=np.array(["cat", "dog"])))
    data = load_dataset(f"npz:{path}")
    assert data.images[0, 0, :, 0].tolist() == [0, 128, 255, 0, 2] and data.class_names == ("cat", "dog")


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"x": np.zeros((2, 4, 4), np.uint8)}, "lacks the array.*y"),
        ({"x": np.zeros((2, 3, 4, 4), np.uint8), "y": np.zeros(2, int)}, "channels must be last"),
        ({"x": np.zeros((2, 4), np.uint8), "y": np.zeros(2, int)}, r"shape \(N, H, W\)"),
        ({"x": np.full((2, 4, 4), np.nan), "y": np.zeros(2, int)}, "NaN"),
        ({"x": np.full((2, 4, 4), 2.0), "y": np.zeros(2, int)}, r"float pixels must lie in \[0, 1\]"),
        ({"x": np.full((2, 4, 4), 300), "y": np.zeros(2, int)}, "0..255"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.zeros(3, int)}, "3 labels but x has 2"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.array([0.0, 1.0])}, "integer array"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.array([0, -1])}, "non-negative"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.array([0, 2]), "class_names": np.array(["a", "b"])}, "0..1"),
        ({"x": np.zeros((2, 4, 4), np.uint8), "y": np.array([0, 1], dtype=object)}, "pickled object array"),
    ],
)
def test_bad_npz_files(arrays, message):
    with pytest.raises(DatasetError, match=message):
        load_uploaded_dataset(npz_bytes(**arrays), "bad.npz")


def test_npz_that_is_not_an_archive(tmp_path):
    with pytest.raises(DatasetError, match="not a valid npz"):
        load_uploaded_dataset(b"definitely not numpy", "x.npz")
    single = tmp_path / "single.npz"
    np.save(single.with_suffix(".npy"), np.zeros(3))
    single.write_bytes(single.with_suffix(".npy").read_bytes())
    with pytest.raises(DatasetError, match="single .npy array"):
        load_dataset(f"npz:{single}")
    with pytest.raises(DatasetError, match="not a valid npz"):
        load_dataset(f"npz:{tmp_path / 'missing.npz'}")


def test_the_exact_test_prefixes_have_no_training_split(shared_data):
    """The pixel-exact CIFAR npz files are prefixes of the *test* sets: asked for a training split they answer
    none (a model trained here on them would have been evaluated on its own training images)."""
    from relu_core import datasets

    for name in ("cifar10-exact", "cifar100-exact"):
        entry = datasets.DATASETS[name]
        assert entry.find("test")[0] is not None
        source, searched = entry.find("train")
        assert source is None and "test images only" in searched[0]


@pytest.mark.slow
def test_cifar10_training_split_is_the_jpeg_training_folder_decoded_once(shared_data, monkeypatch):
    """All 50,000 training images in the test folder's JPEG encoding, 5,000 per class in CIFAR-10's class order,
    none equal to a test image; the second load reads the cache instead of decoding again."""
    train = load_dataset("cifar10", split="train")
    assert train.images.shape == (50000, 32, 32, 3) and train.class_names == CIFAR10_NAMES
    assert np.bincount(train.labels).tolist() == [5000] * 10
    test = load_dataset("cifar10", split="test")
    test_rows = {image.tobytes() for image in test.images}
    assert not any(image.tobytes() in test_rows for image in train.images)

    def must_not_decode(*args, **kwargs):
        raise AssertionError("the decoded training split should have come from the cache")

    monkeypatch.setattr(userdata, "_decode_images", must_not_decode)
    assert load_dataset("cifar10", split="train").fingerprint == train.fingerprint
    assert ds.DATASETS["cifar10"].find("train")[0].location == str(shared_data / "cifar10" / "train_jpeg_q75")


def test_dead_leaves_are_seeded_cached_and_differ_between_splits(monkeypatch):
    from relu_core.datasets import generated

    monkeypatch.setitem(generated.DEAD_LEAVES_SIZES, "train", 300)
    monkeypatch.setitem(generated.DEAD_LEAVES_SIZES, "test", 200)
    train = load_dataset("dead-leaves", split="train")
    test = load_dataset("dead-leaves", split="test")
    assert train.images.shape == (300, 32, 32, 3) and test.images.shape == (200, 32, 32, 3)
    assert train.class_names == ("dead leaves",) and set(train.labels.tolist()) == {0}
    assert not {i.tobytes() for i in train.images} & {i.tobytes() for i in test.images}
    assert 60 < train.images.mean() < 200 and train.images.std() > 40  # colourful, not blank
    again = generated._render(300, 32, np.random.default_rng(5))
    np.testing.assert_array_equal(again, generated._render(300, 32, np.random.default_rng(5)))

    def must_not_render(*args, **kwargs):
        raise AssertionError("the generated images should have come from the cache")

    monkeypatch.setattr(generated, "_render", must_not_render)
    assert load_dataset("dead-leaves", split="train").fingerprint == train.fingerprint
