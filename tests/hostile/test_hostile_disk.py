"""A damaged checkpoint, a squatted one, and a full cache disk (issue 37, roots 6 and 8, and #9's squatting
directory).

- A checkpoint carries a SHA-256 of its bytes, as every other cache file does: one with a flipped bit (which
  ``torch.load`` read without a word, resuming from wrong weights) is moved aside with a warning and training
  starts again; so is a directory squatting the checkpoint's path (training used to fail at its first save).
- A full disk (ENOSPC, simulated in the one writer of files, ``cache.atomic_write``'s temporary file) never
  stops work that only *keeps* something for later: a run selected in the app still becomes current (its record
  for shared links is only missing) with a one-line notice at the top of every page; a trained model and cached
  logits are returned without being kept; a checkpoint that cannot be written (PyTorch said ``RuntimeError: ...
  unexpected pos``) is skipped with a warning and training finishes. A file the user asked for (``--out``)
  still fails in one line, naming it.
"""

from __future__ import annotations

import errno
import io
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch import nn

from relu_core import cache, cli, datasets, paths
from relu_core.errors import Cancelled, InputError
from relu_core.models import Normalization
from relu_core.training import loop, resume

GREY = Normalization((0.5,), (0.5,))


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    train = datasets.load_dataset("digits", split="train")
    return train.images[:200], train.labels[:200]


def _linear() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))


def _fit(digits, checkpoint: Path, epochs: int = 2, cancel=None) -> loop.Trained:
    images, labels = digits
    return loop.fit(
        _linear,
        GREY,
        images,
        labels,
        10,
        epochs=epochs,
        seed=0,
        batch_size=64,
        checkpoint=checkpoint,
        checkpoint_key="k",
        cancel=cancel,
    )


def _stopped_after_one_epoch(digits, checkpoint: Path) -> None:
    steps = []
    with pytest.raises(Cancelled):
        _fit(digits, checkpoint, cancel=lambda: steps.append(1) or len(steps) > 4)  # 4 steps = epoch 1 of 200/64
    assert checkpoint.is_file()


# ------------------------------------------------------------------------------------------- checkpoints


def test_a_bit_flipped_checkpoint_is_set_aside_and_training_restarts(digits, own_cache):
    checkpoint = own_cache / "checkpoints" / "c.pt"
    whole = _fit(digits, own_cache / "whole.pt")
    _stopped_after_one_epoch(digits, checkpoint)
    weights = resume.load(checkpoint, "k")["model"]["1.weight"].numpy().tobytes()
    data = bytearray(checkpoint.read_bytes())
    at = data.find(weights[:64]) + 40  # one bit of one stored weight: torch.load reads such a file without a word
    assert at >= 40
    data[at] ^= 0x01
    checkpoint.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"does not match its SHA-256 .*moved aside.*starts from its first epoch"):
        again = _fit(digits, checkpoint)
    assert again.resumed_from == 0 and [r.epoch for r in again.history] == [1, 2]  # trained again from epoch 1
    assert [r.loss for r in again.history] == pytest.approx([r.loss for r in whole.history], rel=1e-4)
    assert len(list(checkpoint.parent.glob("c.pt.broken-*"))) == 1


def test_a_truncated_or_foreign_checkpoint_is_set_aside(digits, own_cache):
    checkpoint = own_cache / "checkpoints" / "c.pt"
    _stopped_after_one_epoch(digits, checkpoint)
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    assert pytest.warns(UserWarning, loop._load_checkpoint, checkpoint, "k") is None
    buffer = io.BytesIO()
    torch.save({"key": "k", "epoch": 1}, buffer)  # a plain torch.save: no SHA-256, never resumed from
    checkpoint.write_bytes(buffer.getvalue())
    assert pytest.warns(UserWarning, loop._load_checkpoint, checkpoint, "k") is None
    assert not checkpoint.exists() and len(list(checkpoint.parent.glob("c.pt.broken-*"))) == 2


def test_a_whole_checkpoint_resumes_and_one_of_another_key_is_ignored(digits, own_cache):
    checkpoint = own_cache / "checkpoints" / "c.pt"
    _stopped_after_one_epoch(digits, checkpoint)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loop._load_checkpoint(checkpoint, "other") is None and checkpoint.is_file()
        assert _fit(digits, checkpoint).resumed_from == 1


def test_a_directory_squatting_the_checkpoint_is_moved_aside(digits, own_cache):
    checkpoint = own_cache / "checkpoints" / "c.pt"
    (checkpoint / "inside").mkdir(parents=True)
    with pytest.warns(UserWarning, match="is not a file"):
        trained = _fit(digits, checkpoint)
    assert len(trained.history) == 2 and checkpoint.is_file()
    assert [p.is_dir() for p in checkpoint.parent.glob("c.pt.broken-*")] == [True]
    assert resume.load(checkpoint, "k")["epoch"] == 2


# ------------------------------------------------------------------------------------------------ full disk


class Disk:
    """A disk that is full (``full``) and the writes it refused (``refused``)."""

    def __init__(self) -> None:
        self.full, self.refused = True, 0


@pytest.fixture()
def full_disk(monkeypatch) -> Disk:
    """Every file ``cache.atomic_write`` writes fails after its first 64 bytes with ENOSPC while ``full``, as a
    full disk does."""
    disk = Disk()
    fdopen = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, stream):
            self.stream, self.written = stream, 0

        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            size = memoryview(data).nbytes
            if disk.full and self.written + size > 64:
                disk.refused += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.written += size
            return self.stream.write(data)

        def fileno(self) -> int:
            return self.stream.fileno()

        def close(self) -> None:
            self.stream.close()
            super().close()

    def full_fdopen(fd, mode="r", *args, **kwargs):
        stream = fdopen(fd, mode, *args, **kwargs)
        return Full(stream) if "w" in mode else stream

    monkeypatch.setattr(cache.os, "fdopen", full_fdopen)
    cache.note_write_success()
    yield disk
    cache.note_write_success()  # the notice is process-wide: leave none behind


def _no_temporary_files(folder: Path) -> bool:
    return not [p for p in folder.rglob(".tmp-*")]


def test_a_checkpoint_on_a_full_disk_is_skipped_and_training_finishes(digits, own_cache, full_disk):
    checkpoint = own_cache / "checkpoints" / "c.pt"
    with pytest.warns(UserWarning, match=r"checkpoint .*not kept: cannot write .*c\.pt \(No space left on device\)"):
        trained = _fit(digits, checkpoint)
    assert len(trained.history) == 2 and full_disk.refused  # each epoch tried
    assert not checkpoint.exists() and _no_temporary_files(own_cache)
    assert "No space left on device" in cache.write_failure()


def test_a_model_and_its_logits_on_a_full_disk_are_returned_not_kept(own_cache, full_disk):
    labels = np.repeat(np.arange(4), 25)
    logits = np.random.default_rng(0).normal(size=(100, 4)) + 3 * np.eye(4)[labels]
    with pytest.warns(UserWarning, match=r"the cache entry \(logits\) not kept: .*No space left on device"):
        stored = cache.cached("logits", {"k": 1}, lambda: {"logits": logits})
    assert np.array_equal(stored["logits"], logits) and cache.load("logits", {"k": 1}) is None
    assert _no_temporary_files(own_cache)
    notice = cache.write_failure()
    assert "No space left on device" in notice and str(own_cache) not in notice and "\n" not in notice
    full_disk.full = False  # space freed: the next write succeeds, and the notice goes
    cache.save("logits", {"k": 2}, {"small": np.zeros(1)})
    assert cache.write_failure() is None


def test_a_file_asked_for_on_a_full_disk_still_fails_in_one_line(own_cache, full_disk, tmp_path, capsys):
    labels = np.repeat(np.arange(4), 25)
    path = tmp_path / "l.npz"
    np.savez(path, logits=np.random.default_rng(0).normal(size=(100, 4)) + 3 * np.eye(4)[labels], labels=labels)
    status = cli.main(["report", "--logits", str(path), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert status == 2 and "cannot write" in err and "r.html (No space left on device)" in err, err
    with pytest.raises(InputError, match="No space left on device"):
        cache.atomic_write(tmp_path / "x.bin", lambda stream: stream.write(b"x" * 100))


def _select_on_a_full_disk() -> None:
    import numpy as np
    import streamlit as st

    from relu_core import runs  # noqa: F811 - the script runs on its own
    from studio import frame, session
    from studio import runs as studio_runs

    labels = np.repeat(np.arange(4), 25)
    logits = np.random.default_rng(0).normal(size=(100, 4)) + 3 * np.eye(4)[labels]
    run = runs.Run.from_logits(logits.astype(np.float32), labels, ("a", "b", "c", "d"), source="full disk")
    studio_runs.select_run(run)
    frame.cache_notice()
    st.write(f"current: {st.session_state[session.RUN_ID] == run.run_id}")


def test_a_run_selected_on_a_full_disk_works_with_a_one_line_notice(own_cache, full_disk):
    at = AppTest.from_function(_select_on_a_full_disk, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert [m.value for m in at.markdown if m.value.startswith("current")] == ["current: True"]
    (notice,) = [w.value for w in at.warning]
    assert "cannot be written (No space left on device)" in notice and "link will not reopen" in notice
    assert str(own_cache) not in notice and full_disk.refused  # the run's record was tried, and failed


@pytest.mark.slow
def test_the_app_on_a_full_disk_selects_an_uploaded_run_and_says_so_on_every_page(full_disk):
    """The whole app (the trained default run read from the cache): an upload selected while nothing can be
    written becomes the current run, with the one-line notice at the top of the page and of the next page."""
    from apptest_pages import EXPLORE, app

    from relu_core import jobs

    at = app(timeout=300).run()
    assert not at.exception, [e.value for e in at.exception]
    before = at.session_state["run_id"]
    labels = np.repeat(np.arange(4), 25)
    logits = (np.random.default_rng(1).normal(size=(100, 4)) + 3 * np.eye(4)[labels]).astype(np.float32)
    buffer = io.BytesIO()
    np.savez(buffer, logits=logits, labels=labels)
    at.file_uploader(key="upload_logits").upload("full.npz", buffer.getvalue()).run()
    at.button(key="upload_logits_load").click().run()
    for job in jobs.MANAGER.jobs():
        assert job.wait(120), f"job {job.key} did not end"
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert at.session_state["run_id"] != before and full_disk.refused  # the upload is current, not kept on disk
    assert any("The cache cannot be written (No space left on device)" in w.value for w in at.warning)
    at.switch_page(EXPLORE).run()
    assert not at.exception and any("cannot be written" in w.value for w in at.warning)
