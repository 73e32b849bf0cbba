"""Standard data augmentation as batched tensor operations: a random crop of the image's own size out of the image
padded with zeros, and a random horizontal flip, for a whole batch at once (no per-sample Python).

The draws (crop offsets, flips) come from a seeded numpy generator the training loop owns (one stream per epoch, so
a resumed run draws what an uninterrupted one would), are made for the global batch on the CPU and are the same on
every device and every rank; only the gather runs on the batch's device. The augmentation is applied to the
training images the loop is given, never to the held-out part (measured as it is) and never to the test split,
which the loop never sees.

Which augmentation fits which data (:func:`for_dataset`): CIFAR-10/100 get the standard random crop with 4 pixels
of padding and a horizontal flip (what the Rel-U, RegMixUp and OpenMix authors trained with); images of digits
(MNIST, scikit-learn's digits, SVHN) are cropped but never flipped (a mirrored 2, 3 or 7 is not that digit);
Fashion-MNIST's clothes are flipped like CIFAR's objects. The padding is an eighth of the image's side (4 for 32,
3 for 28, 1 for 8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

#: Data sets whose classes do not change under a horizontal mirror (objects, clothes); digits do.
FLIP_SAFE = frozenset({"cifar10", "cifar100", "fashion-mnist"})


@dataclass(frozen=True)
class Draws:
    """The augmentation of a sequence of images: per image the crop's top-left corner (``dy``, ``dx`` in
    0..2·pad, in the padded image) and whether it is mirrored (``flip``); numpy arrays as drawn, or tensors on a
    device (:meth:`on`). Indexing (a slice, or an index array of the same kind) selects images."""

    dy: np.ndarray | torch.Tensor
    dx: np.ndarray | torch.Tensor
    flip: np.ndarray | torch.Tensor

    def __getitem__(self, index) -> Draws:
        return Draws(self.dy[index], self.dx[index], self.flip[index])

    def on(self, move) -> Draws:
        """The draws as tensors moved by ``move`` (a tensor to its device), once for a whole epoch."""
        return Draws(*(move(torch.as_tensor(v)) for v in (self.dy, self.dx, self.flip)))


@dataclass(frozen=True)
class Augmentation:
    """A random crop of the image's size out of the image zero-padded by ``pad`` pixels on each side (0: no
    crop), then a horizontal flip with probability ½ when ``flip`` (torchvision's ``RandomCrop(size,
    padding=pad)`` followed by ``RandomHorizontalFlip()``)."""

    pad: int
    flip: bool

    def __post_init__(self) -> None:
        if isinstance(self.pad, bool) or not isinstance(self.pad, int) or self.pad < 0:
            raise ValueError(f"pad must be an integer >= 0, got {self.pad!r}")

    @property
    def active(self) -> bool:
        return self.pad > 0 or self.flip

    def describe(self) -> str:
        """``random crop (pad 4) + horizontal flip`` and the like, for settings and messages."""
        parts = ([f"random crop (pad {self.pad})"] if self.pad else []) + (["horizontal flip"] if self.flip else [])
        return " + ".join(parts) or "none"

    def settings(self) -> dict[str, object]:
        return {"pad": self.pad, "flip": self.flip}

    def draw(self, n: int, rng: np.random.Generator) -> Draws:
        """The draws for ``n`` images from ``rng``: offsets uniform in 0..2·pad, flips with probability ½."""
        span = 2 * self.pad + 1
        dy = rng.integers(0, span, n) if self.pad else np.zeros(n, np.int64)
        dx = rng.integers(0, span, n) if self.pad else np.zeros(n, np.int64)
        flip = rng.random(n) < 0.5 if self.flip else np.zeros(n, bool)
        return Draws(dy.astype(np.int64), dx.astype(np.int64), flip)

    def apply(self, images: torch.Tensor, draws: Draws) -> torch.Tensor:
        """The augmented batch: ``images`` uint8 (B, H, W, C) on any device, ``draws`` for B images; one gather
        from the zero-padded batch, same shape and dtype out."""
        if not self.active:
            return images
        batch, height, width, _ = images.shape
        device = images.device
        padded = F.pad(images, (0, 0, self.pad, self.pad, self.pad, self.pad)) if self.pad else images
        dy, dx, flip = (torch.as_tensor(v).to(device) for v in (draws.dy, draws.dx, draws.flip))
        rows = dy[:, None] + torch.arange(height, device=device)  # (B, H)
        columns = torch.arange(width, device=device).expand(batch, width)
        columns = dx[:, None] + torch.where(flip[:, None], width - 1 - columns, columns)  # crop, then mirror
        picked = torch.arange(batch, device=device)[:, None, None]
        return padded[picked, rows[:, :, None], columns[:, None, :]]


NONE = Augmentation(0, False)


def for_dataset(name: str, image_shape: tuple[int, int, int]) -> Augmentation:
    """The standard augmentation of a registered data set of ``image_shape`` (height, width, channels): a random
    crop padded by an eighth of the side, and a horizontal flip where mirrored images keep their class
    (:data:`FLIP_SAFE`)."""
    return Augmentation(max(1, min(image_shape[:2]) // 8), name in FLIP_SAFE)
