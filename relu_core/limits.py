"""Stated limits on inputs, checked up front so that a hostile or oversized file is refused in one line
(naming the limit) before anything big is allocated or drawn.

The dashboard stays interactive up to ``MAX_CLASSES`` classes x 50,000 samples; matrix figures show at most
``FIGURE_MAX_CLASSES`` classes (the ones that matter most, with a note) beyond that.
"""

from __future__ import annotations

from relu_core.errors import InputError

MAX_CLASSES = 1000
"""Most classes a logits file or a data set may have."""
MAX_SAMPLES = 1_000_000
"""Most samples (rows) a logits file may have."""
MAX_LOGITS_VALUES = 50_000 * MAX_CLASSES
"""Most logits (samples x classes) in one run: 50,000 samples at 1000 classes."""
MEMORY_BUDGET_BYTES = 2 << 30
"""Most bytes one array read from an uploaded .npz/.npy may need once loaded (checked from its header)."""
MAX_COMPRESSION_RATIO = 100
"""Most a compressed file (an .npz, an image zip) may inflate: the uncompressed size its headers declare, over
its size. Checked before anything is inflated. Real files stay far below (logits about 1.1x, images a few
times); a crafted file of zeros reaches 1000x."""
SMALL_INFLATION_BYTES = 64 << 20
"""A compressed file may inflate to this much whatever its ratio (a small file of zeros is harmless)."""
MAX_INFLATED_BYTES = 8 << 30
"""Most bytes one compressed file may inflate to, whatever its size (the absolute cap of :func:`inflation_budget`)."""
FIGURE_MAX_CLASSES = 50
"""Matrix figures (D*, confusion matrix) beyond this many classes show the top classes only, with a note."""
MAX_RUNS = 16
"""Runs the app keeps in memory per server process (least recently used dropped first)."""
MAX_SESSION_RUNS = 16
"""Runs listed in one browser session's run picker (oldest dropped first)."""
MAX_FINISHED_JOBS = 32
"""Finished background jobs (with their results) the server keeps, oldest finished dropped first."""
MAX_ONNX_NODES = 200_000
"""Most operators an ONNX model may have, its subgraphs and functions counted (real classifiers have hundreds to
tens of thousands; a file of a million ``Identity`` nodes took 3.5 GB to load). Checked before onnxruntime sees it."""
MAX_ONNX_STATIC_BATCH = 1024
"""Largest fixed batch size an ONNX model's input may declare (every batch is padded to it)."""
ONNX_MEMORY_BYTES = 4 << 30
"""Memory an ONNX model may use while it runs, beyond twice its file's size (its process's data segment is capped
at the sum: ``relu_core.onnx_worker``); an allocation beyond it fails at once, in one line naming it."""
ONNX_LOAD_SECONDS = 300.0
"""Longest an ONNX model's process may take to start and make its onnxruntime session before it is stopped."""
ONNX_BATCH_SECONDS = 300.0
"""Longest an ONNX model may take to run one batch before its process is stopped (a ``Loop`` of 2^62 iterations
never ends by itself)."""


def size_in_words(n_bytes: int) -> str:
    """A limit of ``n_bytes`` in a message: "2 GiB" (binary units, at most one decimal; bytes below 1 KiB).
    Amounts compared with a limit are given in exact bytes, so that one just over it never reads as equal."""
    size, unit = float(n_bytes), "bytes"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, next_unit
    return f"{n_bytes:,} bytes" if unit == "bytes" else f"{size:.1f}".removesuffix(".0") + f" {unit}"


def inflation_budget(compressed_bytes: int, cap: int = MAX_INFLATED_BYTES) -> int:
    """Most bytes a compressed file of ``compressed_bytes`` may inflate to: ``MAX_COMPRESSION_RATIO`` times its
    size, at least ``SMALL_INFLATION_BYTES``, never more than ``cap``."""
    return min(cap, max(SMALL_INFLATION_BYTES, MAX_COMPRESSION_RATIO * compressed_bytes))


def check_inflation(declared_bytes: int, compressed_bytes: int, label: str, cap: int = MAX_INFLATED_BYTES) -> None:
    """InputError naming the limit when a file of ``compressed_bytes`` declares more uncompressed bytes than
    :func:`inflation_budget` allows (a "zip bomb"), before anything is inflated."""
    budget = inflation_budget(compressed_bytes, cap)
    if declared_bytes > budget:
        ratio = declared_bytes / max(compressed_bytes, 1)
        raise InputError(
            f"{label} would inflate {compressed_bytes:,} bytes to {declared_bytes:,} ({ratio:,.0f}x), more than "
            f"its budget of {size_in_words(budget)} ({MAX_COMPRESSION_RATIO}x its size, at least "
            f"{size_in_words(SMALL_INFLATION_BYTES)}, at most {size_in_words(cap)}: relu_core.limits.inflation_budget)"
        )


def check_logits_shape(n_samples: int, n_classes: int, what: str = "the logits") -> None:
    """InputError naming the limit when ``n_samples`` x ``n_classes`` logits exceed a stated limit."""
    if n_classes > MAX_CLASSES:
        raise InputError(
            f"{what} have {n_classes:,} classes, more than the limit of {MAX_CLASSES:,} (relu_core.limits.MAX_CLASSES)"
        )
    if n_samples > MAX_SAMPLES:
        raise InputError(
            f"{what} have {n_samples:,} samples, more than the limit of {MAX_SAMPLES:,} (relu_core.limits.MAX_SAMPLES)"
        )
    if n_samples * n_classes > MAX_LOGITS_VALUES:
        raise InputError(
            f"{what} hold {n_samples:,} x {n_classes:,} values, more than the limit of "
            f"{MAX_LOGITS_VALUES:,} (relu_core.limits.MAX_LOGITS_VALUES)"
        )
