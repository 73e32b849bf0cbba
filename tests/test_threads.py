"""The library's thread policy: no global side effect at import, scoped limits, restored settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import ThreadpoolController

from relu_core import detectors, protocol, threads

REPO = Path(__file__).resolve().parent.parent


def current_limit() -> tuple[list[int], int]:
    """(BLAS thread counts, torch intra-op threads) as the process has them now."""
    blas = [lib.num_threads for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    return blas, torch.get_num_threads()


PROBE = """
import json, sys
import numpy, torch
from threadpoolctl import threadpool_info
torch.set_num_threads(2)
def settings():
    return sorted((i["user_api"], i["prefix"], i["num_threads"]) for i in threadpool_info()), torch.get_num_threads()
import scipy.linalg  # the BLAS the library loads, loaded before the snapshot
before = settings()
import relu_core, relu_core.cli, relu_core.detectors, relu_core.metrics, relu_core.protocol, relu_core.stats
import relu_core.robustness, relu_core.engine, relu_core.threads
after = settings()
json.dump({"before": before, "after": after}, sys.stdout)
"""


@pytest.mark.slow
def test_importing_relu_core_changes_no_thread_setting():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout)
    assert probe["before"] == probe["after"]


def test_limited_sections_pin_one_thread_and_restore_the_process_setting():
    before = current_limit()
    with threads.limited():
        blas, torch_threads = current_limit()
        assert set(blas) == {1} and torch_threads == 1
        with threads.limited():  # nested: still one thread, restored only by the outermost
            assert current_limit()[1] == 1
        assert current_limit()[1] == 1
    assert current_limit() == before
    with threads.limited(work=threads.LARGE_WORK_FLOPS):  # large work keeps the process's setting
        assert current_limit() == before


def test_library_calls_run_limited_and_leave_the_setting_alone(monkeypatch):
    seen = []
    real = detectors.quadratic_score.__wrapped__

    def spy(probs, matrix):
        seen.append(current_limit()[1])
        return real(probs, matrix)

    monkeypatch.setattr(detectors.quadratic_score, "__wrapped__", spy)
    before = current_limit()
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(400, 5)), rng.integers(0, 5, 400)
    logits[np.arange(400), labels] += 2
    protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=0)
    assert current_limit() == before
    with threads.limited():
        inside = current_limit()
    assert inside[1] == 1
    assert threads.estimated_flops(np.zeros((50_000, 1000))) == 5e10 >= threads.LARGE_WORK_FLOPS
    assert threads.estimated_flops(np.zeros((10_000, 100))) == 1e8 < threads.LARGE_WORK_FLOPS


def _hot_path_blas() -> list[int]:
    """Threads of numpy's and scipy's OpenBLAS (the hot paths' BLAS). Other BLAS builds that tests load later
    without openblas_set_num_threads_local cannot be limited from worker threads (see the module docstring)."""
    from threadpoolctl import threadpool_info

    return [
        i["num_threads"]
        for i in threadpool_info()
        if i["user_api"] == "blas" and ("numpy.libs" in i["filepath"] or "scipy.libs" in i["filepath"])
    ]


def test_concurrent_sections_restore_the_setting_once_all_have_ended():
    before = current_limit()
    started, release = threading.Barrier(5), threading.Event()

    inside = []

    def work():
        with threads.limited():
            inside.append((_hot_path_blas(), current_limit()[1]))
            started.wait(timeout=10)
            release.wait(timeout=10)

    workers = [threading.Thread(target=work) for _ in range(4)]
    for worker in workers:
        worker.start()
    started.wait(timeout=10)
    assert all(set(blas) == {1} and torch_threads == 1 for blas, torch_threads in inside)
    assert set(_hot_path_blas()) == {1}  # BLAS: process-wide while any section runs
    assert current_limit()[1] == before[1]  # torch: per thread, this one's untouched
    release.set()
    for worker in workers:
        worker.join(timeout=10)
    assert current_limit() == before


def test_the_policy_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(threads, "_enabled", True)
    before = current_limit()
    threads.configure(enabled=False)
    try:
        with threads.limited():
            assert current_limit() == before
    finally:
        threads.configure(enabled=True)
    with pytest.raises(ValueError):
        threads.configure(small_work_threads=0)
    assert torch.get_num_threads() == before[1]


def test_a_worker_thread_is_limited_even_after_the_main_thread_set_the_limit():
    # openblas_set_num_threads from a non-main thread is ignored once the main thread has called it; the
    # policy goes through openblas_set_num_threads_local, which works from Streamlit's script threads too.
    # cv2 (imagecorruptions) bundles an OpenBLAS without it: loaded here so every machine and test order sees
    # the same libraries; no hot path uses that one, so only numpy's and scipy's are checked.
    import cv2  # noqa: F401

    with threads.limited():
        pass
    seen = []

    def work():
        with threads.limited():
            seen.append((_hot_path_blas(), current_limit()[1]))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=10)
    assert seen and set(seen[0][0]) == {1} and seen[0][1] == 1


@pytest.fixture
def large_from_1000_flops():
    """Treat anything of 1,000 multiply-adds or more as large work, for the duration of a test."""
    saved = threads.LARGE_WORK_FLOPS
    threads.configure(large_work_flops=1000)
    yield
    threads.configure(large_work_flops=saved)


def test_small_work_is_one_block_in_the_calling_thread():
    calls = []
    out = threads.map_row_blocks(
        lambda a, b: calls.append((a, b, threading.current_thread())) or b - a, 500, work=threads.LARGE_WORK_FLOPS - 1
    )
    assert out == [500] and calls == [(0, 500, threading.current_thread())]


def test_large_work_runs_ordered_blocks_on_pool_workers_with_one_blas_thread(large_from_1000_flops):
    if threads._workers() < 2:
        pytest.skip("one CPU: large work stays in the calling thread")
    seen = []

    def block(start, stop):
        seen.append((threading.current_thread().name, current_limit()[1]))
        inner = threads.map_row_blocks(lambda a, b: (a, b), stop - start, work=1e12)  # no nested pool
        return start, stop, inner

    out = threads.map_row_blocks(block, 1001, work=1e12)
    starts, stops = [o[0] for o in out], [o[1] for o in out]
    assert starts[0] == 0 and stops[-1] == 1001 and starts[1:] == stops[:-1] and len(out) > 1
    assert all(inner == [(0, stop - start)] for start, stop, inner in out)
    assert all(name.startswith("relu_core-blocks") and torch_threads == 1 for name, torch_threads in seen)


def test_an_error_in_a_block_reaches_the_caller(large_from_1000_flops):
    def block(start, stop):
        if start > 0:
            raise ValueError("bad block")
        return stop

    with pytest.raises(ValueError, match="bad block"):
        threads.map_row_blocks(block, 100, work=1e12)


def test_blocked_detector_math_equals_the_one_block_result(large_from_1000_flops):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(997, 13)) * 3
    correct = rng.random(997) < 0.7
    matrix = rng.random((13, 13))
    blocked = (
        detectors.softmax(logits, 2.0),
        detectors.relu_matrix(detectors.softmax(logits), correct),
        detectors.quadratic_score(detectors.softmax(logits), matrix),
    )
    threads.configure(large_work_flops=1e18)
    whole = (
        detectors.softmax(logits, 2.0),
        detectors.relu_matrix(detectors.softmax(logits), correct),
        detectors.quadratic_score(detectors.softmax(logits), matrix),
    )
    for a, b in zip(blocked, whole):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    bad = logits.copy()
    bad[900, 3] = np.nan
    threads.configure(large_work_flops=1000)
    with pytest.raises(detectors.InputError, match="not finite"):
        detectors.softmax(bad)
