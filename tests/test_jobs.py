"""Background jobs: sharing by key, progress, cancellation, failures, groups (relu_core.jobs, no Streamlit)."""

from __future__ import annotations

import threading

from relu_core import jobs
from relu_core.errors import Cancelled, InputError


def _gate_work(gate: threading.Event, calls: list[int], result: object = 42):
    def work(progress, cancel):
        calls.append(1)
        progress(1, 4, "quarter")
        while not gate.wait(0.01):
            if cancel():
                raise Cancelled("stopped")
        progress(4, 4, "done")
        return result

    return work


def test_same_key_shares_one_job_and_reports_progress():
    manager, gate, calls, landed = jobs.JobManager(), threading.Event(), [], []
    first = manager.submit("k", "job", _gate_work(gate, calls), on_done=landed.append)
    second = manager.submit("k", "job again", _gate_work(gate, calls))
    assert first is second
    for _ in range(200):
        if first.done == 1:
            break
        first.wait(0.01)
    assert first.running and first.message == "quarter" and first.fraction == 0.25
    gate.set()
    assert first.wait(5)
    assert first.state == jobs.DONE and first.result == 42 and landed == [42] and calls == [1]
    assert manager.submit("k", "job", _gate_work(gate, calls)) is first  # a done job is reused, not rerun
    assert calls == [1]


def test_cancel_and_retry():
    manager, gate, calls = jobs.JobManager(), threading.Event(), []
    job = manager.submit("k", "job", _gate_work(gate, calls))
    job.cancel()
    assert job.wait(5) and job.state == jobs.CANCELLED and job.result is None
    gate.set()
    again = manager.submit("k", "job", _gate_work(gate, calls))
    assert again is not job and again.wait(5) and again.state == jobs.DONE and calls == [1, 1]


def test_failure_is_one_line_and_not_raised():
    manager = jobs.JobManager()

    def bad(progress, cancel):
        raise InputError("the file is broken\nsecond line")

    def crash(progress, cancel):
        raise RuntimeError("boom")

    job = manager.submit("bad", "bad", bad)
    assert job.wait(5) and job.state == jobs.FAILED and job.error == "the file is broken"
    other = manager.submit("crash", "crash", crash)
    assert other.wait(5) and other.state == jobs.FAILED and other.error == "RuntimeError: boom"
    assert [j.key for j in manager.jobs()] == ["bad", "crash"]
    manager.forget("bad")
    assert manager.get("bad") is None


def test_a_new_key_in_a_group_cancels_the_previous_one():
    manager, gate, calls = jobs.JobManager(), threading.Event(), []
    old = manager.submit("eps=0.001", "ε", _gate_work(gate, calls, "old"), group="eps view")
    unrelated = manager.submit("other", "x", _gate_work(gate, calls, "x"), group="other view")
    new = manager.submit("eps=0.002", "ε", _gate_work(gate, calls, "new"), group="eps view")
    assert old.wait(5) and old.state == jobs.CANCELLED
    gate.set()
    assert new.wait(5) and new.result == "new"
    assert unrelated.wait(5) and unrelated.result == "x"
