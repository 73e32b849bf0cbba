"""Cached logits are checked when read, not only when computed: an entry rewritten with a NaN or another
shape, its checksum recomputed (the checksum guards against accidents, not against someone who can write the
cache), is dropped with a warning and computed again; ``logits --out`` never writes it out."""

from __future__ import annotations

from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest

from relu_core import cache, cli, paths


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _logits_command(weights: Path, out: Path, capsys) -> tuple[int, str, np.ndarray | None]:
    argv = ["logits", "--model", "cnn8", "--weights", str(weights), "--dataset", "digits", "--device", "cpu"]
    status = cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    if status != 0:
        return status, err, None
    with np.load(out) as written:
        return status, err, written["logits"]


def _rewrite_entry(change) -> Path:
    """Change the only logits entry with ``change(logits)`` and store it with a checksum that matches again."""
    (entry,) = paths.cache_dir("logits").glob("*.npz")
    with np.load(entry) as stored:
        logits = change(stored["logits"].copy())
    checksum = cache._checksum({"logits": logits}, entry.stem)  # the file's name is its key's digest
    np.savez(entry, logits=logits, __checksum__=np.array(checksum))
    return entry


def _nan_first(logits: np.ndarray) -> np.ndarray:
    logits[0, 0] = np.nan
    return logits


@pytest.mark.parametrize(
    "change, reason",
    [
        (_nan_first, "logits contain nan or infinite values"),
        (lambda logits: logits[:10], "have shape (10, 10)"),
        (lambda logits: logits[:, :3], "have shape"),
        (lambda logits: logits[:, 0], "2-d array"),
    ],
    ids=["nan", "fewer-rows", "fewer-classes", "one-d"],
)
def test_a_rewritten_logits_entry_is_dropped_and_computed_again(change, reason, own_cache, tmp_path, capsys):
    weights = hf.state_dict_file(tmp_path / "cnn8.pt")
    status, _, first = _logits_command(weights, tmp_path / "first.npz", capsys)
    assert status == 0 and np.isfinite(first).all()
    entry = _rewrite_entry(change)
    status, err, again = _logits_command(weights, tmp_path / "again.npz", capsys)
    assert status == 0, err
    assert again.shape == first.shape and np.isfinite(again).all()
    np.testing.assert_allclose(again, first, rtol=1e-5, atol=1e-5)
    warning = [line for line in err.splitlines() if line.startswith("warning: a cached entry")]
    assert len(warning) == 1 and reason in warning[0].lower() and "the logits of digits" in warning[0]
    with np.load(entry) as stored:  # the entry now holds the recomputed logits
        np.testing.assert_array_equal(stored["logits"], again)
