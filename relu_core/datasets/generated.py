"""Generated image sets: "dead leaves" images (Lee, Mumford & Huang, 2001; the procedural images Baradad et al.,
NeurIPS 2021, pre-train on): random coloured discs of power-law radii, each occluding the ones drawn before it.

They are OpenMix's outliers for CIFAR-10 here (``studies.objectives.DEFAULT_OUTLIERS``). Why they are fair: OpenMix
needs images "from non-target classes" of the training images' size; these hold no CIFAR-10 object by
construction, share no pixel with any CIFAR-10 split, are unbounded in number (50,000 training / 10,000 test, the
sizes of CIFAR-10's splits), seeded and offline, and no evaluation here uses them, so an OpenMix model cannot have
learned to reject a set it is later evaluated against (the mismatch study's CIFAR-100 images, for instance). What
the authors used, 300K Random Images (80 Million Tiny Images with the CIFAR classes filtered out), is not available
offline; the images here are further from natural photographs, which, if anything, gives OpenMix less to learn
from (docs/how-to/training-objectives.md).

Rendering is vectorised over a chunk of images (one ``where`` per disc layer, none per image) and each split is
computed once into the content-addressed cache (``datasets/generated``).
"""

from __future__ import annotations

import numpy as np

from relu_core import cache
from relu_core.progress import Progress, report

#: Bumped whenever the pictures change: it is part of the cache key.
VERSION = 2
DEAD_LEAVES_SIZES = {"train": 50_000, "test": 10_000}
DEAD_LEAVES_SEEDS = {"train": 0, "test": 1}
DEAD_LEAVES_CLASSES = ("dead leaves",)
#: Discs per image, their radii (pixels, power-law density r⁻³ between the two), images rendered at once.
DISCS = 64
RADII = (1.5, 20.0)
CHUNK = 2_000


def _render(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` dead-leaves images, uint8 (n, size, size, 3): per pixel the last disc (in drawing order) covering it,
    or the image's background colour where none does."""
    low, high = RADII[0] ** -2, RADII[1] ** -2
    radii = (low - rng.random((n, DISCS)) * (low - high)) ** -0.5  # inverse CDF of the r⁻³ density
    centres = rng.uniform(-RADII[1] / 2, size + RADII[1] / 2, (n, DISCS, 2)).astype(np.float32)
    colours = rng.integers(0, 256, (n, DISCS + 1, 3), dtype=np.uint8)  # colour 0: the background
    squared = (radii**2).astype(np.float32)
    grid = np.arange(size, dtype=np.float32) + 0.5
    owner = np.zeros((n, size, size), np.uint8)  # which colour each pixel shows (0: background)
    for k in range(DISCS):  # later discs cover earlier ones
        dy = (grid[None, :] - centres[:, k, 0, None]) ** 2  # (n, size)
        dx = (grid[None, :] - centres[:, k, 1, None]) ** 2
        inside = dy[:, :, None] + dx[:, None, :] <= squared[:, k, None, None]
        owner[inside] = k + 1
    return colours[np.arange(n)[:, None, None], owner]


def dead_leaves(split: str, progress: Progress | None = None, size: int = 32) -> np.ndarray:
    """The ``split`` (``train``: 50,000, ``test``: 10,000) of the dead-leaves images, uint8 (N, size, size, 3),
    seeded, rendered once and then read from the cache."""
    n, seed = DEAD_LEAVES_SIZES[split], DEAD_LEAVES_SEEDS[split]
    key = {"kind": "dead-leaves", "version": VERSION, "n": n, "size": size, "seed": seed, "discs": DISCS}

    def compute() -> dict[str, np.ndarray]:
        chunks = []
        for start in range(0, n, CHUNK):
            report(progress, start, n, f"drawing dead-leaves images ({start:,}/{n:,})")
            chunks.append(_render(min(CHUNK, n - start), size, np.random.default_rng((seed, start))))
        report(progress, n, n, f"drew {n:,} dead-leaves images")
        return {"images": np.concatenate(chunks)}

    return cache.cached("datasets/generated", key, compute)["images"]
