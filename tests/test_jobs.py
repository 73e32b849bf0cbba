"""Background jobs: sharing by key, progress, cancellation, failures, groups (relu_core.jobs, no Streamlit)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from relu_core import jobs, limits
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
    assert (
        other.wait(5)
        and other.state == jobs.FAILED
        and re.fullmatch(r"unexpected error in crash \(reference [0-9a-f]{8}\): RuntimeError: boom", other.error)
    )
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


def test_an_unexpected_failure_is_logged_with_a_reference(caplog):
    def broken(progress, cancel):
        raise ZeroDivisionError("a bug")

    job = jobs.JobManager().submit("bug", "Broken job", broken)
    assert job.wait(5) and job.state == jobs.FAILED
    assert re.fullmatch(
        r"unexpected error in Broken job \(reference [0-9a-f]{8}\): ZeroDivisionError: a bug", job.error
    )
    reference = re.search(r"reference ([0-9a-f]{8})", job.error).group(1)
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is on the server, not in the message


def test_finished_jobs_are_bounded_and_running_ones_kept(monkeypatch):
    monkeypatch.setattr(limits, "MAX_FINISHED_JOBS", 3)
    manager, gate = jobs.JobManager(), threading.Event()
    running = manager.submit("slow", "slow", _gate_work(gate, []))
    for i in range(10):
        assert manager.submit(f"quick{i}", "quick", lambda progress, cancel, i=i: i).wait(5)
    manager.submit("one more", "quick", lambda progress, cancel: 0).wait(5)
    keys = [job.key for job in manager.jobs()]
    assert "slow" in keys and running.running
    # bounded when a job is submitted: the three newest finished ones stay, then the one just submitted
    assert [k for k in keys if k != "slow"] == ["quick7", "quick8", "quick9", "one more"]
    gate.set()
    assert running.wait(5)


def test_a_job_remembers_who_asked_first_to_cancel_it():
    job = jobs.Job("k", "label")
    job.cancel(by="session a")
    job.cancel(by="session b")
    assert job.cancel_requested() and job.cancelled_by == "session a"


def test_inner_work_moves_the_outer_bar():
    """The Baselines' MC-Dropout features reported their batches with the outer step fixed: the text moved,
    the bar did not."""
    from relu_core.progress import within

    job = jobs.Job("k", "label")
    inner = within(job.progress, 1, 4)  # outer step 2 of 4
    inner(0, 10, "features 0/10")
    assert job.fraction == pytest.approx(0.25)
    inner(5, 10, "features 5/10")
    assert job.fraction == pytest.approx(0.375) and job.message == "features 5/10"
    inner(10, 10, "features 10/10")
    assert job.fraction == pytest.approx(0.5)


def test_the_jobs_of_one_lane_run_one_at_a_time_and_wait_cancellably():
    manager = jobs.JobManager()
    release, running, most = threading.Event(), [], [0]
    lock = threading.Lock()

    def work(progress, cancel):
        with lock:
            running.append(1)
            most[0] = max(most[0], len(running))
        release.wait(30)
        with lock:
            running.pop()
        return "ok"

    first = manager.submit("lane:a", "A", work, lane="card")
    second = manager.submit("lane:b", "B", work, lane="card")
    third = manager.submit("lane:c", "C", work, lane="card")
    other = manager.submit("other", "D", work)  # another lane (none): runs beside them
    deadline = time.monotonic() + 30

    def waiting() -> list:
        return [job for job in (first, second, third) if job.message.startswith("waiting")]

    while (len(running) < 2 or len(waiting()) < 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    waiting = waiting()
    assert len(waiting) == 2 and all(j.message == "waiting for the other card jobs" for j in waiting)
    waiting[0].cancel()
    assert waiting[0].wait(10) and waiting[0].state == jobs.CANCELLED  # cancelled while it waited
    release.set()
    for job in (first, second, third, other):
        assert job.wait(30)
    assert most[0] == 2  # one of the lane at a time, beside the job of no lane
    assert sorted(j.state for j in (first, second, third)) == [jobs.CANCELLED, jobs.DONE, jobs.DONE]


def test_a_lane_serves_its_jobs_in_the_order_submitted():
    manager = jobs.JobManager()
    gate, order = threading.Event(), []

    def work(name):
        def run(progress, cancel):
            gate.wait(30)
            order.append(name)

        return run

    submitted = [manager.submit(f"fifo:{k}", str(k), work(k), lane="fifo") for k in range(6)]
    gate.set()
    for job in submitted:
        assert job.wait(30) and job.state == jobs.DONE
    assert order == list(range(6))
