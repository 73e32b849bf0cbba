"""The library's thread policy: no global side effect at import, scoped limits, restored settings."""

from __future__ import annotations

import io
import itertools
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
from relu_core.errors import InputError

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
    real = detectors._quadratic_score

    def spy(probs, matrix, rows):
        seen.append(current_limit()[1])
        return real(probs, matrix, rows)

    monkeypatch.setattr(detectors, "_quadratic_score", spy)
    before = current_limit()
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(400, 5)), rng.integers(0, 5, 400)
    logits[np.arange(400), labels] += 2
    protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=0)
    assert seen and set(seen) == {1}  # every Rel-U score on one torch thread
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


def test_work_on_chosen_rows_is_sized_by_those_rows(monkeypatch):
    if threads._workers() < 2:
        pytest.skip("one CPU: one thread either way")
    probs = detectors.softmax(np.random.default_rng(0).normal(size=(2000, 10)))
    rows = np.arange(0, 2000, 20)  # 100 rows: 10⁴ multiply-adds of 2·10⁵ for all of probs
    monkeypatch.setattr(threads, "LARGE_WORK_FLOPS", 10**5)
    seen = []
    for name in ("_second_moment", "_quadratic_score"):
        real = getattr(detectors, name)
        monkeypatch.setattr(detectors, name, lambda *args, real=real: seen.append(current_limit()[1]) or real(*args))
    detectors.second_moments(probs, np.arange(rows.size) % 3 > 0, rows=rows)
    detectors.quadratic_score(probs, np.ones((10, 10)), rows=rows)
    assert seen == [1, 1, 1]  # small work: limited to one thread, though probs alone is large


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
    """Treat anything of 1,000 multiply-adds or more as large work, in blocks of any size, for the duration of a
    test."""
    saved = threads.LARGE_WORK_FLOPS, threads.MIN_BLOCK_ROWS
    threads.configure(large_work_flops=1000, min_block_rows=1)
    yield
    threads.configure(large_work_flops=saved[0], min_block_rows=saved[1])


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


def test_large_work_blocks_are_never_thinner_than_min_block_rows(large_from_1000_flops, monkeypatch):
    if threads._workers() < 2:
        pytest.skip("one CPU: large work stays in the calling thread")
    threads.configure(min_block_rows=400)

    def block(start, stop):
        return stop - start, threading.current_thread().name, current_limit()[1]

    monkeypatch.setattr(threads, "_workers", lambda: 2)
    sizes = threads.map_row_blocks(block, 1200, work=1e12)
    assert [size for size, _, _ in sizes] == [400, 400, 400]  # 1200 // 400, not workers * BLOCKS_PER_WORKER
    # fewer rows than the minimum: still one block per worker, on pool workers with one thread each
    sizes = threads.map_row_blocks(block, 399, work=1e12)
    assert [size for size, _, _ in sizes] == [199, 200]
    assert all(name.startswith("relu_core-blocks") and torch_threads == 1 for _, name, torch_threads in sizes)
    assert [size for size, _, _ in threads.map_row_blocks(block, 1, work=1e12)] == [1]
    with pytest.raises(ValueError, match="min_block_rows"):
        threads.configure(min_block_rows=0)


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


# --------------------------------------------------------------------------- model work (training, logits, ε)


def _proc_stat(idle_per_cpu: list[int], busy_per_cpu: list[int]) -> str:
    lines = [f"cpu  {sum(busy_per_cpu)} 0 0 {sum(idle_per_cpu)} 0 0 0 0 0 0"]
    for k, (idle, busy) in enumerate(zip(idle_per_cpu, busy_per_cpu, strict=True)):
        lines.append(f"cpu{k} {busy} 0 0 {idle} 0 0 0 0 0 0")
    return "\n".join(lines + ["intr 1 2 3", "ctxt 99"]) + "\n"


@pytest.fixture
def load_following(monkeypatch):
    """The policy following the load (the suite fixes it to one thread), on two CPUs, no real sleeping."""
    monkeypatch.delenv("RELU_STUDIO_MODEL_THREADS", raising=False)
    monkeypatch.setattr(threads, "MODEL_THREADS", None)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(threads.time, "sleep", lambda _s: None)


def _machine(monkeypatch, *snapshots: str) -> None:
    """/proc/stat reads return ``snapshots`` in turn, over and over (a pair: one sample's before and after)."""
    reads = itertools.cycle(snapshots)

    def fake_open(path, *args, **kwargs):
        assert path == "/proc/stat"
        return io.StringIO(next(reads))

    monkeypatch.setattr(threads, "open", fake_open, raising=False)


def test_model_threads_are_the_idle_cpus(load_following, monkeypatch):
    # quiet: both CPUs idle over the sample
    _machine(monkeypatch, _proc_stat([100, 100], [50, 50]), _proc_stat([200, 200], [50, 50]))
    assert threads.idle_cpus() == pytest.approx(2.0) and threads.model_threads() == 2
    # one CPU busy (another process spinning): one thread, never two fighting for one core
    _machine(monkeypatch, _proc_stat([100, 100], [50, 50]), _proc_stat([100, 200], [150, 50]))
    assert threads.idle_cpus() == pytest.approx(1.0) and threads.model_threads() == 1
    # both busy: still one thread; a cap bounds it (the ranks of a torchrun launch share the cores)
    _machine(monkeypatch, _proc_stat([100, 100], [50, 50]), _proc_stat([100, 100], [150, 150]))
    assert threads.model_threads() == 1
    _machine(monkeypatch, _proc_stat([100, 100], [50, 50]), _proc_stat([200, 200], [50, 50]))
    assert threads.model_threads(cap=1) == 1
    # a CPU busy 60 % of the time counts as busy; other processes' CPUs (not in the affinity) are not counted
    _machine(monkeypatch, _proc_stat([10, 10, 10], [0, 0, 0]), _proc_stat([110, 50, 10], [0, 60, 100]))
    assert threads.idle_cpus() == pytest.approx(1.4) and threads.model_threads() == 1


def test_model_threads_without_proc_stat_use_every_cpu(load_following, monkeypatch):
    def no_file(path, *args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(threads, "open", no_file, raising=False)
    assert threads.idle_cpus() is None and threads.model_threads() == 2


def test_fixed_model_threads_win_over_the_load(load_following, monkeypatch):
    _machine(monkeypatch, _proc_stat([100, 100], [50, 50]), _proc_stat([100, 100], [150, 150]))
    monkeypatch.setenv("RELU_STUDIO_MODEL_THREADS", "2")
    assert threads.model_threads() == 2 and threads.model_threads(cap=1) == 1
    threads.configure(model_threads=1)  # the embedding program's knob beats the environment
    try:
        assert threads.model_threads() == 1
    finally:
        threads.configure(model_threads=None)
    for bad in ("0", "two", "-1", "²"):
        monkeypatch.setenv("RELU_STUDIO_MODEL_THREADS", bad)
        with pytest.raises(InputError, match="RELU_STUDIO_MODEL_THREADS must be a whole number"):
            threads.model_threads()
    with pytest.raises(ValueError):
        threads.configure(model_threads=0)


def test_model_work_sets_this_threads_count_rechecks_and_restores(load_following, monkeypatch):
    before = torch.get_num_threads()
    quiet = (_proc_stat([100, 100], [50, 50]), _proc_stat([200, 200], [50, 50]))
    busy = (_proc_stat([200, 200], [50, 50]), _proc_stat([200, 300], [150, 50]))
    _machine(monkeypatch, *quiet, *busy)
    clock = {"now": 1000.0}
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock["now"])
    with threads.model_work() as recheck:
        assert torch.get_num_threads() == 2
        recheck()  # too soon: no look at the machine
        assert torch.get_num_threads() == 2
        clock["now"] += threads.RECHECK_S
        recheck()  # another process took a core meanwhile
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_training_and_inference_run_under_the_model_work_policy(monkeypatch):
    """The training loop and the engine pick their threads through model_work (seen from inside a step)."""
    from relu_core import engine
    from relu_core.models import cnn8
    from relu_core.training import loop

    monkeypatch.setattr(threads, "MODEL_THREADS", None)
    monkeypatch.setenv("RELU_STUDIO_MODEL_THREADS", "1")
    seen: list[int] = []
    batched = engine.batched_outputs

    def spying_batches(step, *args, **kwargs):
        def spy(batch):
            seen.append(torch.get_num_threads())
            return step(batch)

        return batched(spy, *args, **kwargs)

    monkeypatch.setattr(engine, "batched_outputs", spying_batches)
    images = np.random.default_rng(0).integers(0, 255, (6, 8, 8, 1), dtype=np.uint8)
    engine.compute_logits(cnn8(num_classes=3), images, mean=(0.5,), std=(0.5,), device="cpu")
    with loop.seeded(0, torch.device("cpu")) as recheck:
        recheck()
        seen.append(torch.get_num_threads())
    assert len(seen) == 2 and set(seen) == {1}
