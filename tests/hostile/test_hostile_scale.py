"""Many users and big inputs: the run registry and per-session caches are LRU-bounded, figures beyond
50 classes show the top classes with a note, and inputs beyond the stated limits are refused up front."""

from __future__ import annotations

import threading

import hostile_files as hf
import numpy as np
import pytest

from relu_core import figures, limits, metrics, runs
from relu_core.errors import InputError
from relu_core.registry import LRURegistry
from studio import runs as session_runs
from studio import sidebar


def _upload(k: int) -> runs.Run:
    logits = hf.LOGITS + np.float32(k)  # a different content hash per upload
    return sidebar.load_upload("logits", hf.npz(logits=logits, labels=hf.LABELS), f"upload{k}.npz")


def test_50_uploads_keep_no_more_runs_than_the_bound():
    for k in range(50):  # into the app's own registry
        runs.register_run(_upload(k))
    assert len(runs.RUNS) == limits.MAX_RUNS
    kept = list(runs.RUNS)
    assert kept == [_upload(k).run_id for k in range(50 - limits.MAX_RUNS, 50)]  # the most recent ones


def test_memory_after_50_uploads_is_that_of_the_bound(monkeypatch):
    def held(n: int) -> int:
        monkeypatch.setattr(runs, "RUNS", LRURegistry(limits.MAX_RUNS))
        for k in range(n):
            runs.register_run(_upload(k))
        return sum(runs.get_run(rid).logits.nbytes for rid in runs.RUNS)

    assert held(50) <= held(5) + limits.MAX_RUNS * hf.LOGITS.nbytes
    assert held(50) == held(limits.MAX_RUNS)


def test_reading_a_run_keeps_it():
    registry = LRURegistry(2)
    registry["a"], registry["b"] = 1, 2
    assert registry["a"] == 1  # "a" is now the most recent
    registry["c"] = 3
    assert "a" in registry and "b" not in registry and registry.get("b") is None
    assert registry.setdefault("a", 9) == 1 and len(registry) == 2


def test_registry_is_safe_across_threads():
    registry = LRURegistry(8)

    def hammer(offset: int) -> None:
        for k in range(2000):
            registry[(offset, k % 20)] = k
            registry.get((offset, (k + 1) % 20))

    workers = [threading.Thread(target=hammer, args=(t,)) for t in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(registry) == 8


def test_a_byte_bound_drops_the_oldest_arrays_and_keeps_the_newest():
    import torch

    registry = LRURegistry(10, max_bytes=3_000)
    registry["a"] = np.zeros(100)  # 800 bytes each
    registry["b"] = (np.zeros(100), np.zeros(10, dtype=np.int64))  # a tuple counts its arrays: 880
    registry["c"] = torch.zeros(100, dtype=torch.float64)
    registry["d"] = "no array: 0 bytes"
    assert list(registry) == ["a", "b", "c", "d"]
    registry["a"]  # read: the most recent
    registry["e"] = np.zeros(100)  # 3,280 bytes: the least recently used (b) goes
    assert list(registry) == ["c", "d", "a", "e"]
    registry["huge"] = np.zeros(1_000)  # alone over the bound: kept, every other array dropped
    assert list(registry) == ["huge"]
    registry["huge"] = np.zeros(10)  # replaced: its old size no longer counts
    registry["f"] = np.zeros(100)
    assert list(registry) == ["huge", "f"]
    registry.clear()
    registry["g"] = np.zeros(300)
    assert list(registry) == ["g"]


def test_registry_refuses_a_zero_bound():
    with pytest.raises(ValueError, match="at least 1"):
        LRURegistry(0)


def test_session_run_list_is_bounded(monkeypatch):
    state: dict = {}
    monkeypatch.setattr(session_runs.st, "session_state", state)
    monkeypatch.setattr(runs, "RUNS", LRURegistry(limits.MAX_RUNS))
    for k in range(50):
        session_runs.select_run(_upload(k))
    assert len(state["run_ids"]) == limits.MAX_SESSION_RUNS and state["run_id"] == state["run_ids"][-1]


@pytest.mark.parametrize(
    "shape, limit",
    [
        ((200, 5000), "MAX_CLASSES"),
        ((1_000_001, 2), "MAX_SAMPLES"),
        ((60_000, 1000), "MAX_LOGITS_VALUES"),
    ],
)
def test_limits_are_named_in_the_message(shape, limit):
    with pytest.raises(InputError, match=f"relu_core.limits.{limit}"):
        limits.check_logits_shape(*shape)


def test_oversized_logits_refused_from_the_header_alone(monkeypatch):
    monkeypatch.setattr(limits, "MAX_LOGITS_VALUES", 100)  # hf.LOGITS holds 160

    def no_allocation(*args, **kwargs):
        raise AssertionError("np.load must not be reached")

    monkeypatch.setattr(np, "load", no_allocation)
    with pytest.raises(InputError, match="MAX_LOGITS_VALUES"):
        runs.load_logits_upload(hf.npz(logits=hf.LOGITS, labels=hf.LABELS), "big.npz")


def test_confusion_matrix_of_1000_classes_shows_the_top_50_with_a_note():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 1000, 20_000)
    predictions = np.where(rng.random(20_000) < 0.8, labels, rng.integers(0, 1000, 20_000))
    predictions[labels == 7] = 3  # class 7 is always wrong: it must be shown
    cm = metrics.confusion_matrix(predictions, labels, 1000)
    names = [f"class{k}" for k in range(1000)]
    fig = figures.confusion_heatmap(cm, names)
    assert len(fig.data[0].x) == limits.FIGURE_MAX_CLASSES
    assert "top 50 of 1000 classes" in fig.layout.title.text
    assert "class7" in fig.data[0].x and "class3" in fig.data[0].x
    pairs = np.asarray(fig.data[2].customdata)
    assert pairs.max() > limits.FIGURE_MAX_CLASSES  # the original class indices, for the click-to-gallery
    shown = [names.index(n) for n in fig.data[0].x]
    for (true, predicted), count in zip(pairs[:5], fig.data[2].text[:5]):
        assert cm[true, predicted] == int(count) and true in shown


def test_dstar_heatmap_of_1000_classes_shows_the_top_50():
    matrix = np.zeros((1000, 1000))
    matrix[10, 900] = matrix[900, 10] = 1.0
    fig = figures.dstar_heatmap(matrix, [str(k) for k in range(1000)])
    assert len(fig.data[0].x) == 50 and {"10", "900"} <= set(fig.data[0].x)
    assert "top 50 of 1000" in fig.layout.title.text


def test_small_matrices_are_drawn_whole():
    fig = figures.confusion_heatmap(np.eye(5, dtype=int), list("abcde"), title="cm")
    assert fig.layout.title.text == "cm" and len(fig.data[0].x) == 5


def test_a_dropped_run_gives_one_line_not_a_key_error(monkeypatch):
    monkeypatch.setattr(runs, "RUNS", LRURegistry(1))
    first = runs.register_run(_upload(0))
    runs.register_run(_upload(1))
    with pytest.raises(InputError, match="dropped from memory .* load it again"):
        runs.get_run(first)
