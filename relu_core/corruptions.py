"""CIFAR-10-C: the 19 common corruptions of Hendrycks & Dietterich (ICLR 2019), generated or loaded.

``corrupt(images, name, severity, seed)`` re-implements the CIFAR-10 generator ("make_cifar_c.py") with
numpy, scipy and PIL only (no OpenCV, no ImageMagick), vectorised over the batch. Each function follows the
reference operation by operation, in float64 where the reference is float64 (``np.array(img) / 255.``) and
float32 where it is float32, and the result is truncated to uint8 like the reference's ``np.uint8(...)``.

Randomness: one ``numpy.random.Generator`` seeded from ``(seed, crc32(name), severity)`` draws for the whole
batch, image after image in batch order, so the output is deterministic for (images, name, severity, seed) but
the draws an image receives depend on its position in the batch (corrupt a fixed set, as the cache does).

Deviations from the reference (all documented where they happen):

* ``motion_blur`` and ``snow``: ImageMagick's ``-motion-blur`` is replaced by its definition, a one-sided line
  kernel of ``2*ceil(radius)+1`` taps with weights ``exp(-i^2 / (2 sigma^2))`` at offsets
  ``(ceil(i cos a - .5), ceil(i sin a - .5))``, edge pixels repeated, rounded to 8 bits as ImageMagick's PNG is.
* ``spatter`` (water, severities 1-3): Canny, the 5x5 chamfer distance transform, box blurs, ``equalizeHist``
  and ``filter2D`` are re-implemented from OpenCV's definitions (pixel-identical to OpenCV 4 for the same liquid
  layer). A liquid layer without any edge pixel would make the reference divide 0 by 0 (NaN pixels); here that
  image gets no water.
* ``elastic_transform``: the affine warp is exact bilinear interpolation (OpenCV's warpAffine agrees to ~3e-6).
* ``glass_blur``: the reference's "swap" ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on numpy views copies the
  neighbour into ``x[h, w]`` and leaves ``x[h', w']`` as it was; that copy (the semantics that produced the
  published data) is reproduced exactly, vectorised (see ``_glass_shuffle``).
* ``frost``: the photographs are decoded by PIL instead of OpenCV and shrunk by 0.2 with OpenCV's
  ``INTER_LINEAR`` rule re-implemented (it samples pixel ``5 i + 2``); identical pixels to cv2 here.

Grey images ((N,H,W) or (N,H,W,1)): the corruptions that act on each channel (noise, blurs, geometric ones,
contrast, fog, snow, pixelate, JPEG) run on the single channel, i.e. exactly what they do to an RGB image whose
channels are equal, except that each grey pixel receives one random draw. The colour-space ones (brightness,
saturate, frost, spatter) run on the RGB replica and return the luma of the uint8 result as PIL's
``convert("L")`` computes it (``(299 R + 587 G + 114 B + 500) // 1000``, exact on grey pixels).

Other image sizes: with ``s = max(1, min(H, W) / 32)`` (exactly 1 for CIFAR, so the reference parameters hold):
Gaussian sigmas, the defocus disk radius and its anti-alias sigma, motion-blur radius and sigma, the spatter
sigmas and the glass-blur sigma are multiplied by ``s``; glass blur's neighbourhood is ``round(s)``; spatter's
smoothed liquid layer is rescaled around its mean to the spread it has at 32x32 (a wider filter alone would
average the splashes away). ``s`` never drops below 1: the CIFAR parameters are already one-pixel blurs, and
shrinking them makes defocus and Gaussian blur vanish on 8x8 or 16x16 images and breaks defocus's growth with
severity on 28x28 (a disk of radius .875 is a single pixel, the reference's radius 1 is a cross), so images
smaller than 32x32 get the CIFAR pixel parameters, relatively stronger. elastic_transform is already written
in units of the image size (``min(H, W)`` replaces 32); the fog plasma map is the next power of two
>= ``max(H, W)``, cropped to (H, W); the frost photographs are shrunk by ``min(1, 0.2 s)`` (enlarged if
needed so a crop of the image size fits) and cropped to (H, W); pixelate goes down to ``int(W c) x int(H c)``
(on sizes other than 32 two severities can round to the same size); zoom factors, noise levels, colour and
JPEG parameters are size-free. Images must be at least 8x8.

``load_cifar10c`` reads the published files when present; ``corrupted_set`` caches generated sets.
"""

from __future__ import annotations

import importlib.util
import io
import zlib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image
from scipy import ndimage

from relu_core import cache, extras, npz, paths, validation
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress

CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
    "speckle_noise",
    "gaussian_blur",
    "spatter",
    "saturate",
)
SEVERITIES = (1, 2, 3, 4, 5)
CIFAR10C_DIRNAME = "CIFAR-10-C"
# Bumped whenever an implementation change alters generated pixels (part of the cache key).
ALGORITHM_VERSION = 2
_COLOUR_ONLY = frozenset({"brightness", "saturate", "frost", "spatter"})
_FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")  # frost6 is never drawn
_MIN_SIZE = 8


# ----------------------------------------------------------------------------------------------- helpers
def _scale(x: np.ndarray) -> float:
    """Size factor of a (N,H,W,C) batch relative to CIFAR's 32x32, never below 1.

    The CIFAR parameters are already at the one-pixel scale (defocus radius .3 to 1.5, Gaussian sigma .4 to 1);
    shrinking them for smaller images makes the blurs sub-pixel, so that they vanish (defocus on 8x8 or 16x16)
    or stop growing with severity (defocus severity 4 on 28x28: radius .875 loses the disk's four neighbours).
    """
    return max(1.0, min(x.shape[1], x.shape[2]) / 32.0)


def _smoothed_noise_std(sigma: float) -> float:
    """Standard deviation of unit white noise after ``_spatial_gaussian(., sigma)`` (in two dimensions)."""
    radius = int(4.0 * sigma + 0.5)
    impulse = np.zeros(2 * radius + 1)
    impulse[radius] = 1.0
    weights = ndimage.gaussian_filter1d(impulse, sigma, mode="constant")
    return float(np.sum(weights**2))  # separable: the 2-D variance is (sum w^2)^2


def _spatial_gaussian(x: np.ndarray, sigma: float, mode: str = "nearest", truncate: float = 4.0) -> np.ndarray:
    """skimage.filters.gaussian per image (and per channel of (N,H,W,C)): scipy over the two spatial axes."""
    sig = (0.0, sigma, sigma) + (0.0,) * (x.ndim - 3)
    return ndimage.gaussian_filter(x, sig, mode=mode, truncate=truncate)


def _extend_index(index: np.ndarray, size: int, mode: str) -> np.ndarray:
    """Map integer indices outside [0, size) back inside.

    'reflect' extends a b c d as d c b a | a b c d (scipy), 'mirror' as d c b | a b c d (OpenCV's reflect-101).
    """
    if size == 1:
        return np.zeros_like(index)
    if mode == "reflect":
        index = np.mod(index, 2 * size)
        return np.where(index >= size, 2 * size - 1 - index, index)
    period = 2 * size - 2
    index = np.mod(index, period)
    return np.where(index >= size, period - index, index)


def _bilinear(images: np.ndarray, rows: np.ndarray, cols: np.ndarray, mode: str) -> np.ndarray:
    """Sample (N,H,W,C) images at float coordinates rows, cols of shape (N,h,w) with linear interpolation.

    The signal is extended by ``mode`` ('reflect' as scipy's map_coordinates, 'mirror' = OpenCV's
    BORDER_REFLECT_101) before interpolating, as scipy does for order=1.
    """
    n, height, width, _ = images.shape
    r0 = np.floor(rows)
    c0 = np.floor(cols)
    wr = (rows - r0)[..., None].astype(images.dtype)
    wc = (cols - c0)[..., None].astype(images.dtype)
    r0 = r0.astype(np.int64)
    c0 = c0.astype(np.int64)
    r_lo, r_hi = _extend_index(r0, height, mode), _extend_index(r0 + 1, height, mode)
    c_lo, c_hi = _extend_index(c0, width, mode), _extend_index(c0 + 1, width, mode)
    batch = np.arange(n).reshape(n, 1, 1)
    top = images[batch, r_lo, c_lo] * (1 - wc) + images[batch, r_lo, c_hi] * wc
    bottom = images[batch, r_hi, c_lo] * (1 - wc) + images[batch, r_hi, c_hi] * wc
    return top * (1 - wr) + bottom * wr


def _zoom_axis(size: int, zoom: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference's clipped_zoom along one axis: indices and weights of scipy.ndimage.zoom (order 1).

    Crops the centre ``ceil(size / zoom)`` pixels, zooms them to ``round(crop * zoom)`` pixels with scipy's
    corner-aligned mapping (``in = out * (crop - 1) / (out_size - 1)``), trims the centre ``size`` pixels.
    """
    crop = int(np.ceil(size / zoom))
    top = (size - crop) // 2
    out_size = int(round(crop * zoom))
    trim = (out_size - size) // 2
    out = np.arange(trim, trim + size, dtype=np.float64)
    src = out * ((crop - 1) / (out_size - 1)) if out_size > 1 else np.zeros_like(out)
    low = np.minimum(np.floor(src).astype(np.int64), max(crop - 2, 0))
    weight = np.clip(src - low, 0.0, 1.0)
    return top + low, top + np.minimum(low + 1, crop - 1), weight


def _clipped_zoom(x: np.ndarray, zoom: float) -> np.ndarray:
    """Centre zoom of a (N,H,W,C) batch, cropped back to (H,W): separable linear interpolation."""
    r_lo, r_hi, wr = _zoom_axis(x.shape[1], zoom)
    c_lo, c_hi, wc = _zoom_axis(x.shape[2], zoom)
    wr = wr.astype(x.dtype)[None, :, None, None]
    wc = wc.astype(x.dtype)[None, None, :, None]
    rows = x[:, r_lo] * (1 - wr) + x[:, r_hi] * wr
    return rows[:, :, c_lo] * (1 - wc) + rows[:, :, c_hi] * wc


def _motion_blur(x: np.ndarray, radius: float, sigma: float, angles: np.ndarray) -> np.ndarray:
    """ImageMagick's motion blur on a (N,H,W,C) float batch, one angle (degrees) per image.

    Kernel: ``2*ceil(radius)+1`` one-sided taps, weight ``exp(-i^2/(2 sigma^2))`` normalised, tap i reading the
    pixel at ``(row + ceil(i sin a - .5), col + ceil(i cos a - .5))``; outside pixels repeat the edge.
    """
    n, height, width, _ = x.shape
    width_k = int(2 * np.ceil(radius) + 1)
    taps = np.arange(width_k, dtype=np.float64)
    kernel = np.exp(-(taps**2) / (2.0 * sigma * sigma))
    kernel /= kernel.sum()
    rad = np.deg2rad(angles)[:, None]
    d_col = np.ceil(taps[None] * np.cos(rad) - 0.5).astype(np.int64)  # (N, taps)
    d_row = np.ceil(taps[None] * np.sin(rad) - 0.5).astype(np.int64)
    batch = np.arange(n)[:, None, None]
    out = np.zeros(x.shape, dtype=np.float64)
    for i in range(width_k):
        rows = np.clip(np.arange(height)[None] + d_row[:, i : i + 1], 0, height - 1)[:, :, None]
        cols = np.clip(np.arange(width)[None] + d_col[:, i : i + 1], 0, width - 1)[:, None, :]
        out += kernel[i] * x[batch, rows, cols]
    return out


def _rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    """skimage.color.rgb2hsv on (..., 3) floats in [0, 1] (ties: blue, then green, then red decide the hue)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    value = rgb.max(-1)
    delta = value - rgb.min(-1)
    safe_delta = np.where(delta == 0, 1.0, delta)
    safe_value = np.where(value == 0, 1.0, value)
    saturation = np.where(delta == 0, 0.0, delta / safe_value)
    hue = np.where(
        b == value, 4.0 + (r - g) / safe_delta, np.where(g == value, 2.0 + (b - r) / safe_delta, (g - b) / safe_delta)
    )
    hue = np.where(delta == 0, 0.0, (hue / 6.0) % 1.0)
    return np.stack([hue, saturation, value], axis=-1)


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """skimage.color.hsv2rgb on (..., 3) floats."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    sector = np.floor(h * 6)
    f = h * 6 - sector
    sector = sector.astype(np.uint8) % 6
    p = v * (1 - s)
    q = v * (1 - f * s)
    t = v * (1 - (1 - f) * s)
    red = np.choose(sector, [v, q, p, p, t, v])
    green = np.choose(sector, [t, v, v, q, p, p])
    blue = np.choose(sector, [p, p, t, v, v, q])
    return np.stack([red, green, blue], axis=-1)


def _luma(rgb: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma (PIL's and OpenCV's RGB -> grey weights) of (..., 3) arrays, keeping a channel axis."""
    return (rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114)[..., None]


# ----------------------------------------------------------------------------------------- corruptions
# Each takes uint8 (N,H,W,C), the severity, the generator and returns values on the 0..255 scale
# (float before the final uint8 truncation, or uint8 where the reference returns a PIL image).
def _gaussian_noise(x, severity, rng):
    sigma = (0.04, 0.06, 0.08, 0.09, 0.10)[severity - 1]
    x = x / 255.0
    return np.clip(x + rng.normal(size=x.shape, scale=sigma), 0, 1) * 255


def _shot_noise(x, severity, rng):
    c = (500, 250, 100, 75, 50)[severity - 1]
    x = x / 255.0
    return np.clip(rng.poisson(x * c) / c, 0, 1) * 255


def _impulse_noise(x, severity, rng):
    # skimage random_noise(mode='s&p', salt_vs_pepper=.5): each value flips with probability `amount`,
    # to 1 or to 0 with equal odds.
    amount = (0.01, 0.02, 0.03, 0.05, 0.07)[severity - 1]
    x = x / 255.0
    flipped = rng.random(x.shape) < amount
    salted = rng.random(x.shape) < 0.5
    x[flipped & salted] = 1.0
    x[flipped & ~salted] = 0.0
    return np.clip(x, 0, 1) * 255


def _speckle_noise(x, severity, rng):
    c = (0.06, 0.10, 0.12, 0.16, 0.20)[severity - 1]
    x = x / 255.0
    return np.clip(x + x * rng.normal(size=x.shape, scale=c), 0, 1) * 255


def _gaussian_blur(x, severity, rng):
    sigma = (0.4, 0.6, 0.7, 0.8, 1.0)[severity - 1] * _scale(x)
    return np.clip(_spatial_gaussian(x / 255.0, sigma), 0, 1) * 255


def _glass_shuffle(x: np.ndarray, d_row: np.ndarray, d_col: np.ndarray, delta: int) -> np.ndarray:
    """One pass of the reference's pixel "swap", exactly, for a whole batch.

    The reference visits h = H-delta down to delta+1 and, inside, w = W-delta down to delta+1, and executes
    ``x[h, w], x[h+dy, w+dx] = x[h+dy, w+dx], x[h, w]``; with numpy views this copies the neighbour into
    ``x[h, w]`` and leaves the neighbour unchanged. Each visited pixel is therefore written once, when visited,
    and never again: its new value is the neighbour's new value if that neighbour was visited before it, else
    the neighbour's original value. Following these links by pointer doubling gives the sequential result
    without a Python loop over pixels (with delta = 1 the offsets lie in {-1, 0}, every neighbour is visited
    later, and this is a single gather). ``d_row``, ``d_col`` are (N, rows, cols) offsets in [-delta, delta).
    """
    n, height, width, channels = x.shape
    rows = np.arange(height - delta, delta, -1)
    cols = np.arange(width - delta, delta, -1)
    order = np.full((height, width), -1, dtype=np.int64)  # visiting rank, -1 = never visited
    order[np.ix_(rows, cols)] = np.arange(rows.size * cols.size).reshape(rows.size, cols.size)
    flat_order = order.ravel()
    target = (rows[:, None] * width + cols[None, :]).ravel()  # visited pixels, in visiting order
    source = ((rows[:, None] + d_row) * width + (cols[None, :] + d_col)).reshape(n, -1)

    pointer = np.broadcast_to(np.arange(height * width), (n, height * width)).copy()
    resolved = np.ones((n, height * width), dtype=bool)
    pointer[:, target] = source
    source_rank = flat_order[source]
    resolved[:, target] = (source_rank < 0) | (source_rank >= flat_order[target][None])
    while not resolved.all():
        next_pointer = np.take_along_axis(pointer, pointer, axis=1)
        next_resolved = np.take_along_axis(resolved, pointer, axis=1)
        pointer = np.where(resolved, pointer, next_pointer)
        resolved = resolved | next_resolved
    flat = x.reshape(n, height * width, channels)
    return np.take_along_axis(flat, pointer[..., None], axis=1).reshape(x.shape)


def _glass_blur(x, severity, rng):
    sigma, delta, iterations = ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2))[severity - 1]
    scale = _scale(x)
    sigma *= scale
    delta = int(round(delta * scale))
    n, height, width, _ = x.shape
    x = (_spatial_gaussian(x / 255.0, sigma) * 255).astype(np.uint8)
    shape = (n, len(range(height - delta, delta, -1)), len(range(width - delta, delta, -1)))
    for _ in range(iterations):
        d_col = rng.integers(-delta, delta, size=shape)
        d_row = rng.integers(-delta, delta, size=shape)
        x = _glass_shuffle(x, d_row, d_col, delta)
    return np.clip(_spatial_gaussian(x / 255.0, sigma), 0, 1) * 255


def _disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """Normalised disk on the grid -8..8 (or -r..r when r > 8), smoothed like OpenCV's GaussianBlur(3x3 or 5x5,
    reflect-101), with the all-zero border rows and columns removed (they do not change the convolution)."""
    if radius <= 8:
        grid, ksize = np.arange(-8, 9), 3
    else:
        half = int(np.ceil(radius))
        grid, ksize = np.arange(-half, half + 1), 5
    xx, yy = np.meshgrid(grid, grid)
    disk = (xx**2 + yy**2 <= radius**2).astype(np.float64)
    disk /= disk.sum()
    taps = np.arange(ksize) - (ksize - 1) / 2
    gauss = np.exp(-(taps**2) / (2 * alias_blur**2))
    gauss /= gauss.sum()
    disk = ndimage.correlate1d(ndimage.correlate1d(disk, gauss, axis=0, mode="mirror"), gauss, axis=1, mode="mirror")
    nonzero = np.flatnonzero(disk.any(axis=0))
    half = max(grid.size // 2 - nonzero[0], nonzero[-1] - grid.size // 2)
    centre = grid.size // 2
    return disk[centre - half : centre + half + 1, centre - half : centre + half + 1].astype(np.float32)


def _defocus_blur(x, severity, rng):
    radius, alias_blur = ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1))[severity - 1]
    scale = _scale(x)
    kernel = _disk_kernel(radius * scale, alias_blur * scale)
    out = ndimage.correlate(x / 255.0, kernel[None, :, :, None].astype(np.float64), mode="mirror")
    return np.clip(out, 0, 1) * 255


def _motion_blur_corruption(x, severity, rng):
    radius, sigma = ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5))[severity - 1]
    scale = _scale(x)
    angles = rng.uniform(-45, 45, size=x.shape[0])
    # ImageMagick writes 8-bit pixels rounded to nearest.
    return np.rint(_motion_blur(x.astype(np.float64), radius * scale, sigma * scale, angles))


def _zoom_blur(x, severity, rng):
    stop = (1.06, 1.11, 1.16, 1.21, 1.26)[severity - 1]
    zooms = np.arange(1, stop, 0.01)  # the reference's arange, float steps included (7 factors at severity 1)
    x = (x / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for zoom in zooms:
        out += _clipped_zoom(x, float(zoom))
    return np.clip((x + out) / (len(zooms) + 1), 0, 1) * 255


def _snow(x, severity, rng):
    loc, scale_, zoom, threshold, radius, sigma, blend = (
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    )[severity - 1]
    size_scale = _scale(x)
    n, height, width, channels = x.shape
    x = (x / 255.0).astype(np.float32)
    layer = rng.normal(size=(n, height, width, 1), loc=loc, scale=scale_)
    layer = _clipped_zoom(layer, zoom)
    layer[layer < threshold] = 0
    layer = (np.clip(layer, 0, 1) * 255).astype(np.uint8).astype(np.float64)
    angles = rng.uniform(-135, -45, size=n)
    layer = np.rint(_motion_blur(layer, radius * size_scale, sigma * size_scale, angles)) / 255.0
    grey = _luma(x) if channels == 3 else x
    x = blend * x + (1 - blend) * np.maximum(x, grey * 1.5 + 0.5)
    return np.clip(x + layer + np.rot90(layer, k=2, axes=(1, 2)), 0, 1) * 255


def _frost_directory() -> Path:
    """The folder of the frost photographs shipped by the `imagecorruptions` package (not imported: it pulls
    in OpenCV); a `frost/` folder in a data directory is accepted as well."""
    candidates: list[Path] = []
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "frost" for p in spec.submodule_search_locations]
    candidates += [d / "frost" for d in paths.data_dirs()]
    for folder in candidates:
        if all((folder / name).is_file() for name in _FROST_FILES):
            return folder
    missing = extras.missing("imagecorruptions", "the frost corruption (its photographs)")
    raise InputError(f"{missing}; or put its frost/ folder in a data directory ($RELU_STUDIO_DATA)")


@lru_cache(maxsize=8)
def _frost_layers(height: int, width: int, scale: float) -> tuple[np.ndarray, ...]:
    """The five frost photographs (RGB uint8) shrunk like the reference's cv2.resize(fx=fy=0.2*scale, linear)."""
    folder = _frost_directory()
    layers = []
    for name in _FROST_FILES:
        with Image.open(folder / name) as img:
            photo = np.asarray(img.convert("RGB"), dtype=np.float64)
        factor = min(1.0, 0.2 * scale)
        factor = max(factor, (height + 1) / photo.shape[0], (width + 1) / photo.shape[1])
        out_h, out_w = int(round(photo.shape[0] * factor)), int(round(photo.shape[1] * factor))
        # OpenCV INTER_LINEAR with half-pixel centres: src = (dst + .5) / factor - .5, edges clamped.
        inv = 1.0 / factor
        rows = np.clip((np.arange(out_h) + 0.5) * inv - 0.5, 0, photo.shape[0] - 1)
        cols = np.clip((np.arange(out_w) + 0.5) * inv - 0.5, 0, photo.shape[1] - 1)
        rr, cc = np.meshgrid(rows, cols, indexing="ij")
        shrunk = _bilinear(photo[None], rr[None], cc[None], mode="reflect")[0]
        layers.append(np.clip(np.rint(shrunk), 0, 255).astype(np.uint8))
    return tuple(layers)


def _frost(x, severity, rng):
    image_coef, frost_coef = ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45))[severity - 1]
    n, height, width, _ = x.shape
    layers = _frost_layers(height, width, _scale(x))
    which = rng.integers(len(layers), size=n)
    frost = np.empty(x.shape, dtype=np.float64)
    for i in range(n):  # crop positions are drawn per image, in order, like the reference
        layer = layers[which[i]]
        top = rng.integers(0, layer.shape[0] - height)
        left = rng.integers(0, layer.shape[1] - width)
        frost[i] = layer[top : top + height, left : left + width]
    return np.clip(image_coef * x + frost_coef * frost, 0, 255)


def _plasma_fractal(n: int, mapsize: int, wibble_decay: float, rng: np.random.Generator) -> np.ndarray:
    """The reference's diamond-square plasma, (n, mapsize, mapsize) in [0, 1], one map per image."""
    maps = np.zeros((n, mapsize, mapsize))
    step = mapsize
    wibble = 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        squares = corners + np.roll(corners, -1, axis=1)
        squares += np.roll(squares, -1, axis=2)
        maps[:, half:mapsize:step, half:mapsize:step] = wibbled_mean(squares)
        centres = maps[:, half:mapsize:step, half:mapsize:step]
        corners = maps[:, 0:mapsize:step, 0:mapsize:step]
        left = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=2)
        maps[:, 0:mapsize:step, half:mapsize:step] = wibbled_mean(left)
        top = centres + np.roll(centres, 1, axis=2) + corners + np.roll(corners, -1, axis=1)
        maps[:, half:mapsize:step, 0:mapsize:step] = wibbled_mean(top)
        step //= 2
        wibble /= wibble_decay
    maps -= maps.min(axis=(1, 2), keepdims=True)
    return maps / maps.max(axis=(1, 2), keepdims=True)


def _fog(x, severity, rng):
    c, wibble_decay = ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75))[severity - 1]
    n, height, width, _ = x.shape
    mapsize = 1 << int(np.ceil(np.log2(max(height, width))))
    x = x / 255.0
    max_val = x.max(axis=(1, 2, 3), keepdims=True)
    x += c * _plasma_fractal(n, mapsize, wibble_decay, rng)[:, :height, :width, None]
    return np.clip(x * max_val / (max_val + c), 0, 1) * 255


def _brightness(x, severity, rng):
    c = (0.05, 0.1, 0.15, 0.2, 0.3)[severity - 1]
    hsv = _rgb_to_hsv(x / 255.0)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return np.clip(_hsv_to_rgb(hsv), 0, 1) * 255


def _contrast(x, severity, rng):
    c = (0.75, 0.5, 0.4, 0.3, 0.15)[severity - 1]
    x = x / 255.0
    means = x.mean(axis=(1, 2), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1) * 255


def _saturate(x, severity, rng):
    mult, add = ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2))[severity - 1]
    hsv = _rgb_to_hsv(x / 255.0)
    hsv[..., 1] = np.clip(hsv[..., 1] * mult + add, 0, 1)
    return np.clip(_hsv_to_rgb(hsv), 0, 1) * 255


def _affine_matrices(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """cv2.getAffineTransform for a batch: (N,2,3) matrices mapping 3 source (x, y) points to dst (N,3,2)."""
    design = np.concatenate([src, np.ones((3, 1))], axis=1)  # (3, 3)
    return np.swapaxes(np.linalg.solve(design[None], dst), 1, 2)


def _elastic_transform(x, severity, rng):
    n, height, width, channels = x.shape
    size = min(height, width)
    alpha, sigma, affine = (
        np.array(p) * size
        for p in zip(*((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05), (0.1, 0.03, 0.03)))
    )
    alpha, sigma, affine = alpha[severity - 1], sigma[severity - 1], affine[severity - 1]
    x = x.astype(np.float32) / 255.0
    # Random affine (OpenCV convention: points are (x, y); warpAffine samples src at M^-1 (x, y), reflect-101).
    centre = np.array([width // 2, height // 2], dtype=np.float32)
    square = size // 3
    src = np.array([centre + square, [centre[0] + square, centre[1] - square], centre - square], dtype=np.float32)
    dst = src[None] + rng.uniform(-affine, affine, size=(n, 3, 2)).astype(np.float32)
    forward = _affine_matrices(src.astype(np.float64), dst.astype(np.float64))
    linear_inv = np.linalg.inv(forward[:, :, :2])
    offset_inv = -np.einsum("nij,nj->ni", linear_inv, forward[:, :, 2])
    yy, xx = np.meshgrid(np.arange(height, dtype=np.float64), np.arange(width, dtype=np.float64), indexing="ij")
    inv = linear_inv[:, :, :, None, None]
    src_cols = inv[:, 0, 0] * xx + inv[:, 0, 1] * yy + offset_inv[:, 0, None, None]
    src_rows = inv[:, 1, 0] * xx + inv[:, 1, 1] * yy + offset_inv[:, 1, None, None]
    x = _bilinear(x, src_rows, src_cols, mode="mirror").astype(np.float32)
    # Smoothed random displacement (skimage gaussian, reflect, truncate 3), then map_coordinates(order=1, reflect).
    d_col = _spatial_gaussian(rng.uniform(-1, 1, size=(n, height, width)), sigma, "reflect", 3.0) * alpha
    d_row = _spatial_gaussian(rng.uniform(-1, 1, size=(n, height, width)), sigma, "reflect", 3.0) * alpha
    d_col, d_row = d_col.astype(np.float32), d_row.astype(np.float32)
    out = _bilinear(x, yy + d_row, xx + d_col, mode="reflect")
    return np.clip(out, 0, 1) * 255


def _per_image_pil(x: np.ndarray, operation: Callable[[Image.Image], Image.Image]) -> np.ndarray:
    """Apply a PIL operation to each image of a (N,H,W,C) uint8 batch (mode RGB, or L for one channel)."""
    out = np.empty_like(x)
    for i, image in enumerate(x):
        pil = Image.fromarray(image[..., 0] if x.shape[-1] == 1 else image)
        out[i] = np.asarray(operation(pil)).reshape(x.shape[1:])
    return out


def _pixelate(x, severity, rng):
    c = (0.95, 0.90, 0.85, 0.75, 0.65)[severity - 1]
    height, width = x.shape[1:3]
    small = (int(width * c), int(height * c))
    return _per_image_pil(
        x, lambda img: img.resize(small, Image.Resampling.BOX).resize((width, height), Image.Resampling.BOX)
    )


def _jpeg_round_trip(img: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    img.save(buffer, "JPEG", quality=quality)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        decoded.load()
        return decoded.copy()


def _jpeg_compression(x, severity, rng):
    quality = (80, 65, 58, 50, 40)[severity - 1]
    return _per_image_pil(x, lambda img: _jpeg_round_trip(img, quality))


# --- spatter: OpenCV's building blocks, batched over (N,H,W)
def _canny(images: np.ndarray, low: int, high: int) -> np.ndarray:
    """cv2.Canny(images[i], low, high) (aperture 3, L1 gradient) for a (N,H,W) uint8 batch, as a bool mask.

    Sobel with replicated borders, non-maximum suppression in OpenCV's four sectors (tan 22.5 in 15-bit fixed
    point, ``>`` against one neighbour and ``>=`` against the other), then hysteresis: candidates above ``low``
    joined (8-connectivity) to a pixel above ``high``.
    """
    padded = np.pad(images.astype(np.int32), ((0, 0), (1, 1), (1, 1)), mode="edge")
    smooth_rows = padded[:, :-2] + 2 * padded[:, 1:-1] + padded[:, 2:]
    smooth_cols = padded[:, :, :-2] + 2 * padded[:, :, 1:-1] + padded[:, :, 2:]
    gx = smooth_rows[:, :, 2:] - smooth_rows[:, :, :-2]
    gy = smooth_cols[:, 2:, :] - smooth_cols[:, :-2, :]
    mag = np.abs(gx) + np.abs(gy)
    m = np.pad(mag, ((0, 0), (1, 1), (1, 1)))  # magnitude outside the image is 0
    centre = m[:, 1:-1, 1:-1]
    left, right = m[:, 1:-1, :-2], m[:, 1:-1, 2:]
    up, down = m[:, :-2, 1:-1], m[:, 2:, 1:-1]
    ax, ay = np.abs(gx).astype(np.int64), np.abs(gy).astype(np.int64) << 15
    tg22x = ax * 13573  # round(tan(22.5 deg) * 2^15)
    tg67x = tg22x + (ax << 16)
    same_sign = (gx ^ gy) >= 0  # s = +1: compare up-left with down-right, else up-right with down-left
    diag_a = np.where(same_sign, m[:, :-2, :-2], m[:, :-2, 2:])
    diag_b = np.where(same_sign, m[:, 2:, 2:], m[:, 2:, :-2])
    horizontal = ay < tg22x
    vertical = ~horizontal & (ay > tg67x)
    diagonal = ~horizontal & ~vertical
    is_max = (
        (horizontal & (centre > left) & (centre >= right))
        | (vertical & (centre > up) & (centre >= down))
        | (diagonal & (centre > diag_a) & (centre > diag_b))
    )
    candidate = is_max & (centre > low)
    structure = np.zeros((3, 3, 3), dtype=bool)
    structure[1] = True  # 8-connectivity inside each image, never across images
    labels, _ = ndimage.label(candidate, structure=structure)
    strong = np.unique(labels[candidate & (centre > high)])
    return np.isin(labels, strong[strong > 0])


def _box3(x: np.ndarray) -> np.ndarray:
    """cv2.blur(x, (3, 3)) on a (N,H,W) batch (reflect-101 border) before its final cast: the exact 3x3 sum
    (float64) times the double 1/9, as OpenCV computes it for uint8 and float32 images."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)), mode="reflect")
    rows = padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]
    return (rows[:, :, :-2] + rows[:, :, 1:-1] + rows[:, :, 2:]) * (1.0 / 9)


def _equalize_hist(images: np.ndarray) -> np.ndarray:
    """cv2.equalizeHist for a (N,H,W) uint8 batch, image by image."""
    n = images.shape[0]
    flat = images.reshape(n, -1)
    total = flat.shape[1]
    hist = np.bincount((flat + 256 * np.arange(n)[:, None]).ravel(), minlength=256 * n).reshape(n, 256)
    first = np.argmax(hist > 0, axis=1)
    first_count = hist[np.arange(n), first]
    cumulative = np.cumsum(hist, axis=1) - np.cumsum(hist, axis=1)[np.arange(n), first][:, None]
    scale = (np.float32(255.0) / np.maximum(total - first_count, 1).astype(np.float32))[:, None]
    lut = np.clip(np.rint((cumulative.astype(np.float32) * scale).astype(np.float32)), 0, 255)
    constant = first_count == total  # OpenCV leaves a one-valued image as it is
    lut[constant] = np.arange(256)
    return np.take_along_axis(lut, flat.astype(np.int64), axis=1).reshape(images.shape).astype(np.uint8)


def _chamfer_distance(sources: np.ndarray) -> np.ndarray:
    """cv2.distanceTransform(~sources, DIST_L2, 5) for a (N,H,W) bool batch: distance to the nearest True pixel.

    OpenCV's 5x5 chamfer (steps 1, 1.4, 2.1969) in float32, a forward and a backward raster pass, each pixel
    in OpenCV's order; every step is vectorised over the batch. Images without a source stay at FLT_MAX.
    """
    hv, diag, long_ = np.float32(1.0), np.float32(1.4), np.float32(2.1969)
    n, height, width = sources.shape
    b = 2  # border of FLT_MAX around the image
    tmp = np.full((height + 2 * b, width + 2 * b, n), np.finfo(np.float32).max, dtype=np.float32)
    src = np.moveaxis(sources, 0, -1)
    for i in range(b, b + height):
        above = np.minimum.reduce(
            [
                tmp[i - 2, b - 1 : b - 1 + width] + long_,
                tmp[i - 2, b + 1 : b + 1 + width] + long_,
                tmp[i - 1, b - 2 : b - 2 + width] + long_,
                tmp[i - 1, b - 1 : b - 1 + width] + diag,
                tmp[i - 1, b : b + width] + hv,
                tmp[i - 1, b + 1 : b + 1 + width] + diag,
                tmp[i - 1, b + 2 : b + 2 + width] + long_,
            ]
        )
        above[src[i - b]] = 0
        for j in range(width):
            tmp[i, b + j] = np.minimum(above[j], tmp[i, b + j - 1] + hv)
    for i in range(b + height - 1, b - 1, -1):
        below = np.minimum.reduce(
            [
                tmp[i, b : b + width],
                tmp[i + 2, b + 1 : b + 1 + width] + long_,
                tmp[i + 2, b - 1 : b - 1 + width] + long_,
                tmp[i + 1, b + 2 : b + 2 + width] + long_,
                tmp[i + 1, b + 1 : b + 1 + width] + diag,
                tmp[i + 1, b : b + width] + hv,
                tmp[i + 1, b - 1 : b - 1 + width] + diag,
                tmp[i + 1, b - 2 : b - 2 + width] + long_,
            ]
        )
        for j in range(width - 1, -1, -1):
            tmp[i, b + j] = np.minimum(below[j], tmp[i, b + j + 1] + hv)
    return np.moveaxis(tmp[b : b + height, b : b + width], -1, 0).copy()


def _spatter(x, severity, rng):
    loc, scale_, sigma, threshold, intensity, mud = (
        (0.62, 0.1, 0.7, 0.7, 0.5, 0),
        (0.65, 0.1, 0.8, 0.7, 0.5, 0),
        (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1),
        (0.65, 0.1, 0.5, 0.68, 0.6, 1),
    )[severity - 1]
    size_scale = _scale(x)
    n, height, width, _ = x.shape
    x = x.astype(np.float32) / 255.0
    liquid = _spatial_gaussian(rng.normal(size=(n, height, width), loc=loc, scale=scale_), sigma * size_scale)
    if size_scale != 1:
        # A wider filter also averages the noise down, and almost no liquid would pass the threshold on large
        # images: restore the spread the layer has at 32x32, so the splashes are larger but as frequent.
        liquid = loc + (liquid - loc) * (_smoothed_noise_std(sigma) / _smoothed_noise_std(sigma * size_scale))
    liquid[liquid < threshold] = 0
    if mud:
        mask = _spatial_gaussian((liquid > threshold).astype(np.float32), intensity * size_scale)
        mask[mask < 0.8] = 0
        colour = np.array([63, 42, 20], dtype=np.float32) / 255.0 * mask[..., None]
        return np.clip(x * (1 - mask[..., None]) + colour, 0, 1) * 255
    # (liquid * 255).astype(np.uint8) wraps modulo 256 above 1.0 in the reference; kept.
    liquid_u8 = (np.floor(liquid * 255).astype(np.int64) & 255).astype(np.uint8)
    edges = _canny(liquid_u8, 50, 150)
    dist = np.minimum(_chamfer_distance(edges), np.float32(20.0))
    dist = _box3(dist).astype(np.float32).astype(np.uint8)
    dist = _equalize_hist(dist)
    ridge = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], dtype=np.float64)
    dist = np.clip(ndimage.correlate(dist.astype(np.float64), ridge[None], mode="mirror"), 0, 255)
    dist = np.rint(_box3(dist)).astype(np.float32)
    water = liquid_u8 * dist
    peak = water.max(axis=(1, 2), keepdims=True)
    water = np.where(peak > 0, water / np.where(peak > 0, peak, 1), 0) * intensity
    colour = np.array([175, 238, 238], dtype=np.float32) / 255.0
    return np.clip(x + water[..., None] * colour, 0, 1) * 255


_FUNCTIONS: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "defocus_blur": _defocus_blur,
    "glass_blur": _glass_blur,
    "motion_blur": _motion_blur_corruption,
    "zoom_blur": _zoom_blur,
    "snow": _snow,
    "frost": _frost,
    "fog": _fog,
    "brightness": _brightness,
    "contrast": _contrast,
    "elastic_transform": _elastic_transform,
    "pixelate": _pixelate,
    "jpeg_compression": _jpeg_compression,
    "speckle_noise": _speckle_noise,
    "gaussian_blur": _gaussian_blur,
    "spatter": _spatter,
    "saturate": _saturate,
}


# ------------------------------------------------------------------------------------------ public API
def _check_name_severity(name: str, severity: int) -> None:
    if name not in CORRUPTIONS:
        raise InputError(f"unknown corruption {name!r}; expected one of: {', '.join(CORRUPTIONS)}")
    validation.integer(severity, "severity", minimum=min(SEVERITIES), maximum=max(SEVERITIES))


def _check_seed(seed: int) -> None:
    validation.integer(seed, "seed", minimum=0)


def _check_images(images: np.ndarray) -> None:
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8:
        kind = images.dtype if isinstance(images, np.ndarray) else type(images).__name__
        raise InputError(f"images must be a uint8 numpy array, got {kind}")
    if images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[-1] not in (1, 3)):
        raise InputError(f"images must have shape (N,H,W,3), (N,H,W,1) or (N,H,W), got {images.shape}")
    if min(images.shape[1:3]) < _MIN_SIZE:
        raise InputError(f"images must be at least {_MIN_SIZE}x{_MIN_SIZE} pixels, got {images.shape[1:3]}")


def _generator(seed: int, name: str, severity: int, *extra: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(name.encode()), int(severity), *extra])


def _apply(images: np.ndarray, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Validated images -> corrupted uint8 images of the same shape."""
    if images.shape[0] == 0:
        return images.copy()
    x = images[..., None] if images.ndim == 3 else images
    grey_to_rgb = x.shape[-1] == 1 and name in _COLOUR_ONLY
    if grey_to_rgb:
        x = np.repeat(x, 3, axis=-1)
    out = _FUNCTIONS[name](np.ascontiguousarray(x), int(severity), rng)
    if out.dtype != np.uint8:
        out = np.clip(out, 0, 255).astype(np.uint8)  # truncation, as the reference's np.uint8
    if grey_to_rgb:  # PIL's convert("L"): rounded integer luma, exact on grey pixels
        weighted = out.astype(np.int32) @ np.array([299, 587, 114], dtype=np.int32)
        out = ((weighted + 500) // 1000).astype(np.uint8)
    return out.reshape(images.shape)


def corrupt(images: np.ndarray, name: str, severity: int, seed: int = 0) -> np.ndarray:
    """Corrupt a batch of images with one CIFAR-10-C corruption.

    Parameters
    ----------
    images : uint8 array (N,H,W,3) RGB, (N,H,W,1) or (N,H,W) grey, H and W >= 8.
    name : one of ``CORRUPTIONS``.
    severity : 1 to 5.
    seed : non-negative integer; the generator is seeded from (seed, name, severity).

    Returns
    -------
    uint8 array of the same shape. The same arguments always give the same pixels. See the module docstring
    for the size-scaling rule, the handling of grey images and the deviations from the reference.
    """
    _check_name_severity(name, severity)
    _check_seed(seed)
    _check_images(images)
    return _apply(images, name, severity, _generator(seed, name, severity))


# ---------------------------------------------------------------------------------- published files
def load_cifar10c(
    name: str, severity: int, directories: list[Path] | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The published CIFAR-10-C images and labels of one corruption and severity, or None when absent.

    Looks for ``CIFAR-10-C/<name>.npy`` (severity-major, 5 x N images) and ``CIFAR-10-C/labels.npy`` in each of
    ``directories`` (default ``paths.data_dirs()``). The file is memory-mapped; only the N rows of the severity are
    read. Returns (uint8 (N,32,32,3), int64 (N,)). A file of the wrong shape raises InputError.
    """
    _check_name_severity(name, severity)
    for directory in paths.data_dirs() if directories is None else directories:
        folder = Path(directory) / CIFAR10C_DIRNAME
        images_path, labels_path = folder / f"{name}.npy", folder / "labels.npy"
        if not (images_path.is_file() and labels_path.is_file()):
            continue
        try:
            images = npz.open_npy(images_path)  # memory-mapped, its header read without ``ast`` (relu_core.npz)
            labels = npz.open_npy(labels_path)
        except (ValueError, OSError) as exc:
            raise InputError(f"{images_path} or {labels_path} is not a readable .npy file: {exc}") from None
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8 or images.shape[0] % 5:
            raise InputError(f"{images_path} must hold uint8 (5*N, H, W, 3) images, got {images.dtype} {images.shape}")
        if labels.ndim != 1 or labels.shape[0] not in (images.shape[0], images.shape[0] // 5):
            raise InputError(f"{labels_path} must hold {images.shape[0]} labels, got shape {labels.shape}")
        per_severity = images.shape[0] // 5
        rows = slice((severity - 1) * per_severity, severity * per_severity)
        label_rows = rows if labels.shape[0] == images.shape[0] else slice(None)
        return np.array(images[rows]), np.asarray(labels[label_rows], dtype=np.int64)
    return None


# ------------------------------------------------------------------------------------ cached generation
class CorruptedSet(NamedTuple):
    """A generated corrupted set: ``images[i]`` is the corrupted ``source[indices[i]]``, labelled ``labels[i]``."""

    images: np.ndarray
    labels: np.ndarray
    indices: np.ndarray


NAMESPACE = "corruptions"
CHUNK = 1000  # images per generator stream in corrupted_set (fixed: part of what the cached pixels mean)


def subsample_indices(n_images: int, subsample: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random subset of ``subsample`` images out of ``n_images`` (all when None or
    when ``subsample >= n_images``)."""
    if subsample is None or subsample >= n_images:
        return np.arange(n_images)
    validation.integer(subsample, "subsample", minimum=1, hint=" or None")
    return np.sort(np.random.default_rng([int(seed), n_images, int(subsample)]).choice(n_images, subsample, False))


def _cache_key(fingerprint: str, name: str, severity: int, seed: int, subsample: int | None) -> dict:
    """What a corrupted set's pixels depend on: its entry in :mod:`relu_core.cache` (namespace ``corruptions``)."""
    return {
        "kind": "corrupted-set",
        "data": fingerprint,
        "corruption": name,
        "severity": severity,
        "seed": seed,
        "subsample": subsample,
        "chunk": CHUNK,
        "algorithm": ALGORITHM_VERSION,
    }


def corrupted_set(
    images: np.ndarray,
    labels: np.ndarray,
    dataset_fingerprint: str,
    name: str,
    severity: int,
    seed: int = 0,
    subsample: int | None = None,
    *,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> CorruptedSet:
    """A corrupted copy of a data set (or of a seeded subsample of it), cached on disk.

    The cache (:mod:`relu_core.cache`, namespace ``corruptions``) is keyed by (dataset_fingerprint, name, severity,
    seed, subsample); writes are atomic and an entry that is unreadable, fails its checksum or has the wrong
    shape is recomputed. Images are corrupted in chunks of
    ``CHUNK`` with one generator per chunk seeded from (seed, name, severity, chunk), so progress can be reported
    and the pixels do not depend on anything but the key. Raises ``Cancelled`` when ``cancel()`` returns True.
    """
    _check_name_severity(name, severity)
    _check_seed(seed)
    _check_images(images)
    labels = np.asarray(labels)
    if labels.shape != (images.shape[0],):
        raise InputError(f"labels must have shape ({images.shape[0]},), got {labels.shape}")
    if not isinstance(dataset_fingerprint, str) or not dataset_fingerprint:
        raise InputError("dataset_fingerprint must be a non-empty string")
    indices = subsample_indices(images.shape[0], subsample, seed)
    expected_shape = (indices.size, *images.shape[1:])
    key = _cache_key(dataset_fingerprint, name, severity, seed, subsample)
    stored = cache.load(NAMESPACE, key)
    cached = None if stored is None else stored.get("images")
    if cached is None or cached.dtype != np.uint8 or cached.shape != expected_shape:
        cached = np.empty(expected_shape, dtype=np.uint8)
        n_chunks = max(1, -(-indices.size // CHUNK))
        for chunk in range(n_chunks):
            if cancel is not None and cancel():
                raise Cancelled(f"generating {name} severity {severity} was cancelled")
            part = indices[chunk * CHUNK : (chunk + 1) * CHUNK]
            cached[chunk * CHUNK : chunk * CHUNK + part.size] = _apply(
                images[part], name, severity, _generator(seed, name, severity, chunk)
            )
            if progress is not None:
                progress(chunk * CHUNK + part.size, indices.size, f"{name} severity {severity}")
        cache.save(NAMESPACE, key, {"images": cached})
    return CorruptedSet(images=cached, labels=labels[indices].astype(np.int64), indices=indices)
