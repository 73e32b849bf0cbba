"""The library's thread policy: slider-sized work runs on one BLAS / torch thread, scoped to the call.

Why: the hot paths (softmax, second moments, Rel-U scores, curves) multiply matrices of a few MB. On a
quiet 2-core machine a second BLAS thread saves a millisecond or two; on a busy one (a Streamlit server
with several sessions, a benchmark beside a training job) the threads spin against each other and the
same update takes 10-20x longer (bench/bench_core.py prints both). So every public entry point that does
such work runs inside :func:`limited`, which pins OpenBLAS/MKL (through threadpoolctl) and torch's
intra-op pool to :data:`SMALL_WORK_THREADS` for the duration of the outermost call, then restores what
the process had.

Work estimated at :data:`LARGE_WORK_FLOPS` or more (e.g. 50k x 1000 moments) is split into row blocks
that a pool of one worker per CPU pulls from a queue (:func:`map_row_blocks`), each block on one BLAS
thread. Multi-threaded BLAS splits a product evenly between its threads, so when another process holds
one of two cores the thread sharing that core finishes last and the call takes twice as long; workers
that pull small blocks share the work out by the CPU each one actually gets.

**Model work** (training, the engine's logits and ε passes on the CPU) runs inside :func:`model_work`: its
torch intra-op threads are the CPUs that other work leaves idle (:func:`model_threads`: /proc/stat watched
for :data:`IDLE_SAMPLE_S`), checked again every :data:`RECHECK_S` seconds between batches. One torch thread
per core is fastest on an idle machine, but when another process holds one of the two cores, each layer's
OpenMP barrier waits for the descheduled sibling: training took 10x longer with 2 threads than with 1
(docs/reference/conventions.md, "Threads"). Thread counts change float rounding (a seeded training agrees to
~1e-5, not bit for bit, across counts): :func:`configure` (``model_threads=N``) or
``RELU_STUDIO_MODEL_THREADS=N`` fixes the count.

This module is the one place to change the policy (:func:`configure`). Importing ``relu_core`` changes
no thread setting.

The BLAS thread count is process-wide, so its limit is reference-counted under a lock: it is set when
the first limited section of any thread starts and restored when the last one ends (a large BLAS
computation that starts meanwhile runs with one thread until then). OpenBLAS is set through
``openblas_set_num_threads_local`` where the build has it (numpy's and scipy's wheels do): unlike
``openblas_set_num_threads`` it takes effect from any thread, including Streamlit's script threads after
the main thread has set it. Other BLAS builds (e.g. the OpenBLAS 0.3.15 bundled with opencv, which the
corruptions load) are set through threadpoolctl, best effort: from a worker thread such a build may keep
its threads, which costs nothing here because no hot path calls into it. torch's intra-op setting belongs to the calling thread (OpenMP), so each
thread saves and restores its own.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import torch

from relu_core.errors import InputError

#: Threads for slider-sized work.
SMALL_WORK_THREADS = 1
#: Estimated multiply-adds from which a call is split into row blocks run by a pool of workers.
LARGE_WORK_FLOPS = 5e9
#: Row blocks per worker for large work: enough for a worker on a busy core to do less than the others.
BLOCKS_PER_WORKER = 8
#: Fewest rows in a block of large work: thinner blocks run BLAS less efficiently, and each block's C x C second
#: moment is one more matrix to add up (``bench/bench_limits.py``, 10,000 x 1000 moments on the 2-core development
#: machine: blocks of any size 384 ms, of at least 1,024 rows 326 ms).
MIN_BLOCK_ROWS = 1024
#: Model work's torch threads: None follows the idle CPUs (:func:`model_threads`), a number fixes them.
MODEL_THREADS: int | None = None
#: How long :func:`idle_cpus` watches the machine, and how often model work looks again.
IDLE_SAMPLE_S = 0.1
RECHECK_S = 15.0

_lock = threading.Lock()
_depth = 0  # limited sections running in any thread: the BLAS setting is the process's
_saved: tuple[list, list, list[int]] | None = None
_local = threading.local()  # per-thread depth and torch setting
_libraries: tuple[list, list] | None = None
_modules_seen = 0
_enabled = True

F = TypeVar("F", bound=Callable)
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


_FOLLOW_LOAD = object()


def configure(
    *,
    enabled: bool | None = None,
    small_work_threads: int | None = None,
    large_work_flops: float | None = None,
    min_block_rows: int | None = None,
    model_threads: int | None | object = _FOLLOW_LOAD,
) -> None:
    """Change the policy for the whole process: switch it off (``enabled=False``: the process's own
    settings everywhere), set the thread count for small work, the size from which work is large and the fewest
    rows of its blocks, or fix
    model work's thread count (``model_threads=N``; ``None`` makes it follow the idle CPUs again).

    The knob for a program that embeds the library and manages threads itself (the manual's "Threads",
    docs/reference/conventions.md, points here); the test suite fixes model threads so that its trainings do not
    depend on the load."""
    global _enabled, SMALL_WORK_THREADS, LARGE_WORK_FLOPS, MIN_BLOCK_ROWS, MODEL_THREADS
    if enabled is not None:
        _enabled = bool(enabled)
    if small_work_threads is not None:
        if int(small_work_threads) < 1:
            raise ValueError("small_work_threads must be at least 1")
        SMALL_WORK_THREADS = int(small_work_threads)
    if large_work_flops is not None:
        LARGE_WORK_FLOPS = float(large_work_flops)
    if min_block_rows is not None:
        if int(min_block_rows) < 1:
            raise ValueError("min_block_rows must be at least 1")
        MIN_BLOCK_ROWS = int(min_block_rows)
    if model_threads is not _FOLLOW_LOAD:
        if model_threads is not None and int(model_threads) < 1:
            raise ValueError("model_threads must be at least 1")
        MODEL_THREADS = None if model_threads is None else int(model_threads)


def _blas_libraries() -> tuple[list, list]:
    """``(per_thread, process_wide)``: ``openblas_set_num_threads_local`` of each loaded OpenBLAS that has
    it (0.3.27+: numpy's and scipy's wheels), and threadpoolctl controllers of the other BLAS libraries.
    Looked up again whenever modules were imported since the last look (an import may load another BLAS)."""
    global _libraries, _modules_seen
    if _libraries is None or len(sys.modules) != _modules_seen:
        _modules_seen = len(sys.modules)
        from threadpoolctl import ThreadpoolController

        per_thread, process_wide = [], []
        for controller in ThreadpoolController().lib_controllers:
            if controller.user_api != "blas":
                continue
            setter = getattr(ctypes.CDLL(controller.filepath), "openblas_set_num_threads_local", None)
            if controller.internal_api == "openblas" and setter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
                per_thread.append(setter)
            else:
                process_wide.append(controller)
        _libraries = per_thread, process_wide
    return _libraries


def _enter() -> None:
    global _depth, _saved
    with _lock:
        if _depth == 0:
            per_thread, process_wide = _blas_libraries()
            # set_num_threads_local returns the previous setting; it takes effect from whichever thread calls
            previous = [setter(SMALL_WORK_THREADS) for setter in per_thread]
            previous += [lib.get_num_threads() for lib in process_wide]
            _saved = (per_thread, process_wide, previous)  # restored on exactly these libraries
            for lib in process_wide:
                lib.set_num_threads(SMALL_WORK_THREADS)
        _depth += 1
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.torch_threads = torch.get_num_threads()
        if _local.torch_threads != SMALL_WORK_THREADS:
            torch.set_num_threads(SMALL_WORK_THREADS)
    _local.depth = depth + 1


def _exit() -> None:
    global _depth, _saved
    _local.depth -= 1
    if _local.depth == 0 and torch.get_num_threads() != _local.torch_threads:
        torch.set_num_threads(_local.torch_threads)
    with _lock:
        _depth -= 1
        if _depth == 0 and _saved is not None:
            per_thread, process_wide, previous = _saved
            for setter, n in zip(per_thread, previous):
                setter(n)
            for lib, n in zip(process_wide, previous[len(per_thread) :]):
                lib.set_num_threads(n)
            _saved = None


def _workers() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _block_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=_workers(), thread_name_prefix="relu_core-blocks", initializer=_mark_block_worker
            )
        return _pool


def _mark_block_worker() -> None:
    _local.block_worker = True


def _run_block(function: Callable[[int, int], T], start: int, stop: int) -> T:
    with limited():
        return function(start, stop)


def map_row_blocks(function: Callable[[int, int], T], n_rows: int, work: float) -> list[T]:
    """``[function(start, stop), ...]`` over consecutive row blocks covering ``range(n_rows)``, in order.

    Small work (``work`` below :data:`LARGE_WORK_FLOPS` estimated multiply-adds), a switched-off policy,
    a single CPU, or a call from inside a block worker (no nested pools): one block, ``[function(0, n_rows)]``,
    run in the caller's thread. Large work: about :data:`BLOCKS_PER_WORKER` blocks per CPU but none thinner
    than :data:`MIN_BLOCK_ROWS` rows, and at least one per CPU (rows allowing), run by a process-wide pool of one
    worker per CPU, each block on one BLAS/torch thread. The first exception a
    block raises is raised here. ``function`` must only read shared inputs (or write disjoint rows).
    """
    workers = _workers()
    if not _enabled or work < LARGE_WORK_FLOPS or workers < 2 or getattr(_local, "block_worker", False):
        return [function(0, n_rows)]
    # one block per worker at least (rows allowing): a wide matrix's few rows still use every CPU
    n_blocks = max(min(workers, n_rows), min(n_rows // MIN_BLOCK_ROWS, workers * BLOCKS_PER_WORKER))
    edges = [n_rows * k // n_blocks for k in range(n_blocks + 1)]
    pool = _block_pool()
    futures = [pool.submit(_run_block, function, start, stop) for start, stop in zip(edges[:-1], edges[1:])]
    return [future.result() for future in futures]


@contextmanager
def limited(work: float = 0.0) -> Iterator[None]:
    """Run the block under the small-work thread limit unless ``work`` (estimated multiply-adds) is at
    least :data:`LARGE_WORK_FLOPS` or the policy is off. Nested and concurrent sections share one limit."""
    if not _enabled or work >= LARGE_WORK_FLOPS:
        yield
        return
    _enter()
    try:
        yield
    finally:
        _exit()


def estimated_flops(*args: object) -> float:
    """``N * C * C`` of the first (N, C) array among ``args`` (a second moment or a Rel-U score costs
    about that many multiply-adds), 0 when there is none or its size is a symbol (torch.export capturing a
    graph: a float would pin the batch size to the example's)."""
    for value in args:
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) == 2:
            if not all(isinstance(d, int) for d in shape):
                return 0.0
            return float(shape[0]) * float(shape[1]) ** 2
    return 0.0


def small_work(function: F) -> F:
    """Decorator: run ``function`` under :func:`limited`, sized by :func:`estimated_flops` of its arguments."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with limited(estimated_flops(*args, *kwargs.values())):
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _cpu_jiffies(cpus: set[int]) -> tuple[int, int] | None:
    """``(idle, total)`` jiffies of ``cpus`` so far (/proc/stat: idle and iowait count as idle), None where
    there is no /proc/stat or it names none of them."""
    try:
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    idle = total = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            idle += ticks[3] + ticks[4]
            total += sum(ticks)
    return (idle, total) if total else None


def idle_cpus(sample_s: float = IDLE_SAMPLE_S) -> float | None:
    """How many of this process's CPUs were idle over the next ``sample_s`` seconds (busy threads of this
    process count as busy), None where the kernel does not say (no /proc/stat)."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    before = _cpu_jiffies(cpus)
    if before is None:
        return None
    time.sleep(sample_s)
    after = _cpu_jiffies(cpus)
    if after is None or after[1] <= before[1]:
        return None
    return len(cpus) * (after[0] - before[0]) / (after[1] - before[1])


def model_threads(cap: int | None = None) -> int:
    """torch intra-op threads for model work starting now: :data:`MODEL_THREADS` when fixed, else the idle
    CPUs rounded to the nearest whole CPU (a CPU busy half the time is shared), at least 1 and at most ``cap``
    (default: this process's CPUs). Where idleness cannot be read, every CPU. ``RELU_STUDIO_MODEL_THREADS``
    fixes the count when :func:`configure` has not."""
    cap = _workers() if cap is None else max(1, int(cap))
    fixed = MODEL_THREADS if MODEL_THREADS is not None else _threads_from_environment()
    if fixed is not None:
        return min(fixed, cap)
    idle = idle_cpus()
    return cap if idle is None else max(1, min(cap, int(idle + 0.5)))


def _threads_from_environment() -> int | None:
    value = os.environ.get("RELU_STUDIO_MODEL_THREADS", "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise InputError(f"RELU_STUDIO_MODEL_THREADS must be a whole number of at least 1, got {value[:20]!r}")
    return int(value)


@contextmanager
def model_work(cap: int | None = None) -> Iterator[Callable[[], None]]:
    """Run the block's torch work on :func:`model_threads` threads (this thread's setting, restored after).
    Yields ``recheck()``, to call between batches: every :data:`RECHECK_S` seconds it picks the count again,
    so a training that began on an idle machine stops fighting a process that starts beside it."""
    saved = torch.get_num_threads()
    checked = time.monotonic()
    torch.set_num_threads(model_threads(cap))

    def recheck() -> None:
        nonlocal checked
        if time.monotonic() - checked >= RECHECK_S:
            checked = time.monotonic()
            wanted = model_threads(cap)
            if wanted != torch.get_num_threads():
                torch.set_num_threads(wanted)

    try:
        yield recheck
    finally:
        torch.set_num_threads(saved)
