"""Builders of hostile and malformed inputs shared by the hostile-input suite (bytes and small files only)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from relu_core import models

RNG = np.random.default_rng(0)
LABELS = np.repeat(np.arange(4), 10)
# about 80 % accurate: a run the app can evaluate (it refuses one without errors)
LOGITS = (RNG.normal(size=(40, 4)) + 2 * np.eye(4)[LABELS]).astype(np.float32)


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array))
    return buffer.getvalue()


def npy_header(shape: tuple[int, ...], descr: str = "<f4", payload: bytes = b"\0" * 16) -> bytes:
    """A .npy stream whose header announces ``shape`` but that holds only ``payload``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + payload


def zip_members(**members: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def allocation_bomb(key: str = "logits", shape=(10**8, 10**5), **others: np.ndarray) -> bytes:
    """A tiny npz whose ``key`` member announces ``shape`` float32 (1e13 values by default)."""
    return zip_members(**{f"{key}.npy": npy_header(shape)}, **{f"{k}.npy": npy(v) for k, v in others.items()})


LOGITS_BOMB = allocation_bomb("logits", labels=LABELS)


#: Hostile logits files and the (lower-case) part of the one-line message each must give.
LOGITS_FILES = {
    "npy-saved-as-npz": (npy(LOGITS), "a single .npy array saved under an .npz name"),
    "allocation-bomb": (LOGITS_BOMB, "announces shape (100000000, 100000)"),
    "bomb-in-labels": (allocation_bomb("labels", (10**12,), logits=LOGITS), "array 'labels' announces shape"),
    "header-larger-than-member": (allocation_bomb("logits", (40, 4), labels=LABELS), "truncated or crafted header"),
    "object-array": (zip_members(**{"logits.npy": npy_header((2,), "|O", b"")}), "pickled object array"),
    "member-not-npy": (zip_members(**{"logits.npy": b"hello"}), "is not a valid .npy array"),
    "5000-classes": (
        npz(logits=np.zeros((200, 5000), np.float32), labels=np.zeros(200, int)),
        "5,000 classes, more than the limit of 1,000 (relu_core.limits.max_classes)",
    ),
    "not-a-zip": (b"PK\x03\x04 but not really", "not a valid npz archive"),
    "empty": (b"", "not a valid npz archive"),
    "nan-logits": (npz(logits=np.full((20, 3), np.nan), labels=np.zeros(20, int)), "finite"),
    "labels-out-of-range": (npz(logits=np.zeros((20, 3)), labels=np.full(20, 7)), "labels"),
    "3d-logits": (npz(logits=np.zeros((4, 3, 2)), labels=np.zeros(4, int)), "2-d array"),
    "string-logits": (npz(logits=np.array([["a", "b"], ["c", "d"]]), labels=np.zeros(2, int)), "numbers"),
    "no-labels": (npz(logits=LOGITS), "no 'labels'"),
}


def script(module: nn.Module, path: Path) -> Path:
    torch.jit.script(module.eval()).save(str(path))
    return path


class ReturnsTuple(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = x.flatten(1)[:, :10]
        return logits, logits


class ReturnsDict(nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": x.flatten(1)[:, :10]}


class ReturnsNaN(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :10] * float("nan")


class Raises(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 0:
            raise RuntimeError("boom in forward")
        return x


class Returns1D(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1).sum(dim=1)


class ReturnsInt(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :10].to(torch.int64)


class ReturnsOneRow(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:1, :10]


class ReturnsInf(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :10] + float("inf")


BAD_SCRIPTED = {
    "tuple": (ReturnsTuple, "the model returned a tuple, not a tensor"),
    "dict": (ReturnsDict, "the model returned a dict, not a tensor"),
    "nan": (ReturnsNaN, "the model returned nan or infinite logits"),
    "inf": (ReturnsInf, "the model returned nan or infinite logits"),
    "raises": (Raises, "the model raised an error in forward: builtins.runtimeerror: boom in forward"),
    "one-d": (Returns1D, "the model must return (n, classes) logits"),
    "int": (ReturnsInt, "the model must return floating-point logits"),
    "wrong-rows": (ReturnsOneRow, "the model must return (n, classes) logits with n ="),
}


def scripted_nan_weights(path: Path) -> Path:
    model = models.cnn8(10)
    with torch.no_grad():
        model.classifier.weight.fill_(float("nan"))
    return script(model, path)


def state_dict_file(path: Path, fill: float | None = None) -> Path:
    model = models.cnn8(10)
    if fill is not None:
        with torch.no_grad():
            model.features[0].weight.fill_(fill)
    torch.save(model.state_dict(), path)
    return path


def write_folder(root: Path, n_per_class: int = 3) -> np.ndarray:
    """A small RGB image folder ``root/<a|b>/<k>.png`` of 6x5 images; returns the images in load order."""
    from PIL import Image

    images = []
    for label, name in enumerate(("a", "b")):
        (root / name).mkdir(parents=True, exist_ok=True)
        for k in range(n_per_class):
            pixels = np.full((6, 5, 3), 40 * label + 10 * k, np.uint8)
            pixels[0, 0] = (k, label, 7)
            Image.fromarray(pixels).save(root / name / f"{k}.png")
            images.append(pixels)
    return np.stack(images)


def zip_folder(root: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(root.rglob("*.png")):
            archive.write(path, path.relative_to(root).as_posix())
    return buffer.getvalue()


_EVALUATE_CNN8_ON_DIGITS = ("evaluate", "--model", "cnn8", "--dataset", "digits", "--seeds", "1", "--device", "cpu")


def evaluate_argv(weights: Path, *extra: str) -> list[str]:
    """``evaluate`` of the checkpoint ``weights`` as a cnn8 on digits, one seed, on the CPU, then ``extra``."""
    return [*_EVALUATE_CNN8_ON_DIGITS, "--weights", str(weights), *extra]
