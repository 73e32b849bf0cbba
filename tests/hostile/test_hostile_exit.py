"""Hostile input, round five: a process that ran background jobs exits cleanly. Job threads are daemons; one still
inside torch while the interpreter finalises aborted the process (SIGABRT, "terminate called without an active
exception") after the Start page had started its scorecard. At exit the running jobs are cancelled and waited for
(``relu_core.jobs.stop_at_exit``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: A job in torch, polling its cancel between steps, started just before the interpreter exits.
JOB_AT_EXIT = """
import sys, threading, torch
from relu_core import jobs
marker, started = sys.argv[1], threading.Event()

def work(progress, cancel):
    x = torch.randn(256, 256)
    started.set()
    while not cancel():
        x = torch.tanh(x @ x)  # torch work on its intra-op threads
    open(marker, "w").write("cancelled at exit")
    return None

torch.set_num_threads(2)
job = jobs.MANAGER.submit("exit-test", "exit test", work)
started.wait(60)
print("exiting with the job", job.state)
"""


def _exit_cleanly(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "terminate called" not in done.stderr


def test_a_running_job_is_cancelled_and_joined_at_exit(tmp_path):
    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-c", JOB_AT_EXIT, str(marker)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    _exit_cleanly(done)
    assert "exiting with the job running" in done.stdout
    assert marker.read_text() == "cancelled at exit"  # the work saw the cancel: the exit waited for it


def test_stop_all_cancels_and_waits():
    import threading

    from relu_core import jobs
    from relu_core.errors import Cancelled

    manager, started = jobs.JobManager(), threading.Event()

    def work(progress, cancel):
        started.set()
        while not cancel():
            started.wait(0.01)
        raise Cancelled("stopped")

    job = manager.submit("k", "label", work)
    assert started.wait(60)
    assert manager.stop_all(60, by="test") == []
    assert job.state == jobs.CANCELLED and job.cancelled_by == "test"


#: The Start page through AppTest (its scorecard and default-run jobs start), then the interpreter exits.
START_THEN_EXIT = """
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=240)
at.run()
print("ran Start:", not at.exception)
"""


@pytest.mark.slow
def test_a_process_that_ran_the_start_page_exits_cleanly(shared_data, tmp_path):
    """The Fashion-MNIST default (4 of 8 exits aborted; 0 of 12 with digits), twice: about a minute each."""
    env = {**os.environ, "RELU_STUDIO_DEFAULT": "fashion-mnist", "RELU_STUDIO_CACHE": str(tmp_path / "cache")}
    for _ in range(2):  # every exit must be clean
        done = subprocess.run(
            [sys.executable, "-c", START_THEN_EXIT], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
        _exit_cleanly(done)
        assert "ran Start: True" in done.stdout
