"""The jobs panel's rows (studio.jobbox.job_rows) and the name of Explore's paired bootstrap job (issue 43: after
leaving Explore, two identical unnamed "paired bootstrap: starting" rows)."""

from __future__ import annotations

import pytest

from relu_core import explore, jobs
from studio import jobbox


def _job(key: str, label: str, message: str = "starting", done: int = 0, total: int = 0) -> jobs.Job:
    job = jobs.Job(key, label)
    job.progress(done, total, message)
    return job


def test_jobs_that_read_the_same_are_one_row_and_cancel_together() -> None:
    a, b = _job("a", "Bootstrap", "running", 1, 4), _job("b", "Bootstrap", "running", 3, 4)
    c = _job("c", "Training", "epoch 2 of 14", 2, 14)
    rows = jobbox.job_rows([a, c, b])
    assert [(label, message) for label, message, _, _ in rows] == [
        ("Bootstrap (×2)", "running"),
        ("Training", "epoch 2 of 14"),
    ]
    assert rows[0][2] == 0.5 and rows[0][3] == [a, b] and rows[1][3] == [c]
    jobbox._cancel_all(rows[0][3], "session-1")
    assert a.cancel_requested() and b.cancel_requested() and not c.cancel_requested()
    assert a.cancelled_by == "session-1"


@pytest.mark.slow
def test_the_paired_bootstraps_of_neighbouring_lambdas_are_named_apart(digits_run) -> None:
    views = [explore.view(digits_run, explore.Setting(lam=lam)) for lam in (0.49, 0.5, 0.51)]
    labels = {explore.views.paired_job_label(v) for v in views}
    assert labels == {f"Rel-U − Doctor paired bootstrap at λ = {lam:g}, T = 1" for lam in (0.49, 0.5, 0.51)}
    auto = explore.view(digits_run, explore.Setting(lam="auto"))
    assert explore.views.paired_job_label(auto).startswith("Rel-U − Doctor paired bootstrap at λ auto = 0.")
    job = explore.paired_job(views[0])
    assert job.label == explore.views.paired_job_label(views[0])
    assert job.wait(120) and job.state == jobs.DONE and job.result
