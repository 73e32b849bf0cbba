"""A λ the slider passed over has its paired bootstrap cancelled (``explore_ui.cancel_superseded_paired``): with D*
refitted in every resample one takes about a second at 10,000 samples, and left running they would take the two
cores from the slider's reruns."""

from __future__ import annotations

import threading

import numpy as np

from relu_core import explore, jobs
from relu_core.runs import Run
from studio import explore_ui, session


def _view(lam: float) -> explore.View:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 400)
    logits = (rng.normal(size=(400, 4)) + 3 * np.eye(4)[labels] * rng.random((400, 1))).astype(np.float32)
    run = Run.from_logits(logits, labels, tuple("abcd"), source="superseded test")
    return explore.view(run, explore.Setting(lam=lam))


def _waiting_job(key: str, release: threading.Event) -> jobs.Job:
    def work(progress, cancel):
        while not release.wait(0.01):
            if cancel():
                raise jobs.Cancelled("cancelled")
        return {}

    return jobs.MANAGER.submit(key, "a paired bootstrap that waits", work)


def test_the_bootstraps_of_views_no_longer_shown_are_cancelled_and_the_shown_ones_kept():
    old, shown, neighbour = _view(0.3), _view(0.5), _view(0.51)
    release = threading.Event()
    try:
        passed_over = _waiting_job(explore.paired_job_key(old), release)
        still_shown = _waiting_job(explore.paired_job_key(neighbour), release)
        state = {session.SESSION_ID: "me"}
        explore_ui.cancel_superseded_paired(state, old, explore_ui.Neighbours({}, "", 1))  # the page showed λ 0.3
        explore_ui.cancel_superseded_paired(  # then λ 0.5, with 0.51 as a neighbour
            state, shown, explore_ui.Neighbours({"0.51": neighbour}, "0.5", 2)
        )
        assert passed_over.wait(5) and passed_over.state == jobs.CANCELLED and passed_over.cancelled_by == "me"
        assert still_shown.running and not still_shown.cancel_requested()
        assert state[session.EX_PAIRED_KEYS] == {explore.paired_job_key(shown), explore.paired_job_key(neighbour)}
    finally:
        release.set()
        for v in (old, neighbour):
            jobs.MANAGER.forget(explore.paired_job_key(v))
