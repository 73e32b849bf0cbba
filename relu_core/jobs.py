"""Background jobs: long work (logits, ε passes, studies) in worker threads that outlive page changes and reruns.

One process-wide :data:`MANAGER` holds the jobs, keyed by an explicit string naming the computation (for
example ``logits:cnn28:fashion-mnist``): two sessions asking for the same key share one job. A job reports
progress (``done / total`` and a message), can be cancelled (cooperatively: the work polls ``cancel()``), and
ends ``done`` with its result, ``failed`` with a one-line message, or ``cancelled``. Results of finished jobs
stay in the manager until :meth:`JobManager.forget`; the work itself writes its own caches (``relu_core.cache``),
so nothing already computed is lost when a job fails or a session leaves. No Streamlit here.

At the interpreter's exit the running jobs are cancelled and waited for (:func:`stop_at_exit`, registered with
``atexit``; at most :data:`EXIT_WAIT_S`): a job thread is a daemon, and one still inside torch while the
interpreter tears down aborted the process ("terminate called without an active exception", SIGABRT) after a
page had started background work. The work stops at its next ``cancel()`` poll (between batches, steps,
resamples).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from relu_core import limits
from relu_core.errors import USER_ERRORS, Cancelled, unexpected, user_message
from relu_core.progress import Cancel, Progress

RUNNING, DONE, FAILED, CANCELLED = "running", "done", "failed", "cancelled"

Work = Callable[[Progress, Cancel], object]
#: How often a job waiting for its lane looks whether it was cancelled.
LANE_POLL_S = 0.2
#: Longest the interpreter's exit waits for the running jobs once they are cancelled (:func:`stop_at_exit`).
EXIT_WAIT_S = 60.0


@dataclass(eq=False)
class Job:
    """One computation in a worker thread; read its fields from any thread (they are replaced, not mutated)."""

    key: str
    label: str
    group: str = ""
    state: str = RUNNING
    done: int = 0
    total: int = 0
    message: str = "starting"
    result: object = None
    error: str = ""
    #: Who asked first to cancel it (e.g. a browser session's id; "" when nobody said).
    cancelled_by: str = ""
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def fraction(self) -> float:
        return min(max(self.done / self.total, 0.0), 1.0) if self.total else 0.0

    def progress(self, done: int, total: int, message: str) -> None:
        self.done, self.total, self.message = int(done), int(total), str(message)

    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self, by: str = "") -> None:
        """Ask the work to stop at its next ``cancel()`` poll (the state turns ``cancelled`` when it does);
        ``by`` names who asked (kept from the first request), so that sharers of the job can be told."""
        if not self._cancel.is_set():
            self.cancelled_by = by
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job has ended (True) or ``timeout`` seconds passed (False)."""
        return self._finished.wait(timeout)

    def settle(self, timeout: float, keep: Callable[[object], None]) -> tuple[bool, str]:
        """Wait up to ``timeout`` seconds; a finished job's result goes to ``keep``, a failed or cancelled one is
        forgotten by :data:`MANAGER` (asking again retries). Returns (whether it is still running, the message of
        a failure, "" otherwise): what a page's poll of a background result needs."""
        error = ""
        if self.wait(timeout):
            if self.state == DONE:
                keep(self.result)
            else:
                error = self.error if self.state == FAILED else ""
                MANAGER.forget(self.key)
        return self.running, error


class _Lane:
    """The jobs of one lane, first submitted first served: each runs once those before it have ended (a job
    cancelled while it waits leaves the queue)."""

    def __init__(self) -> None:
        self._queue: list[Job] = []
        self._turn = threading.Condition()

    def join(self, job: Job) -> None:
        with self._turn:
            self._queue.append(job)

    def wait_turn(self, job: Job, message: str) -> None:
        """Blocks until ``job`` is first in the queue, saying ``message`` meanwhile; raises Cancelled when the job is
        cancelled before its turn."""
        with self._turn:
            if self._queue[0] is not job:
                job.progress(0, 0, message)
            while self._queue[0] is not job:
                if job.cancel_requested():
                    raise Cancelled()
                self._turn.wait(LANE_POLL_S)
        job.progress(0, 0, "starting")

    def leave(self, job: Job) -> None:
        with self._turn:
            if job in self._queue:
                self._queue.remove(job)
            self._turn.notify_all()


class JobManager:
    """Thread-safe registry of jobs keyed by computation; one daemon thread per running job."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}

    def submit(
        self,
        key: str,
        label: str,
        work: Work,
        *,
        group: str = "",
        on_done: Callable[[object], None] | None = None,
        lane: str = "",
    ) -> Job:
        """The job for ``key``: the running or finished one when there is one, else a new one running
        ``work(progress, cancel)``. A failed or cancelled job is replaced (asking again retries).

        ``group``: submitting a new key cancels the running jobs of the same group (e.g. the ε pass of one
        view: only the last value asked for is computed). ``on_done(result)`` runs in the worker thread after
        a success (e.g. to register a run), before the job reads as done. ``lane``: the jobs of one lane run one
        at a time, first submitted first (each waits, running and cancellable, saying so): background work
        that nobody waits on (the Start page's scorecard, five studies) then takes one core, not every core a
        slider's rerun needs.
        """
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.state in (RUNNING, DONE):
                return job
            if group:
                for other in self._jobs.values():
                    if other.group == group and other.running:
                        other.cancel()
            job = Job(key, label, group)
            self._jobs[key] = job
            self._drop_oldest_finished()
            queue = None
            if lane:
                queue = (lane, self._lanes.setdefault(lane, _Lane()))
                queue[1].join(job)
        args = (job, work, on_done, queue)
        threading.Thread(target=self._work, args=args, name=f"job {key}", daemon=True).start()
        return job

    @staticmethod
    def _work(job: Job, work: Work, on_done: Callable[[object], None] | None, lane=None) -> None:
        lane_name, lane = lane if lane is not None else ("", None)
        try:
            if lane is not None:
                lane.wait_turn(job, f"waiting for the other {lane_name} jobs")
            result = work(job.progress, job.cancel_requested)
            if on_done is not None:
                on_done(result)
        except Cancelled:
            job.state = CANCELLED
        except USER_ERRORS as exc:
            job.error = user_message(exc)
            job.state = FAILED
        except Exception as exc:  # noqa: BLE001 - a worker never dies silently: logged with a reference
            job.error = unexpected(exc, job.label)
            job.state = FAILED
        else:
            job.result = result
            job.state = DONE
        finally:
            if lane is not None:
                lane.leave(job)
            job.finished = time.monotonic()
            job._finished.set()

    def _drop_oldest_finished(self) -> None:
        """Keep at most :data:`limits.MAX_FINISHED_JOBS` finished jobs (their results hold arrays and runs); the
        oldest finished go first, running jobs always stay. Caller holds the lock."""
        finished = sorted((j for j in self._jobs.values() if not j.running), key=lambda j: j.finished or 0.0)
        for job in finished[: max(0, len(finished) - limits.MAX_FINISHED_JOBS)]:
            del self._jobs[job.key]

    def get(self, key: str) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def jobs(self) -> list[Job]:
        """Every known job, oldest first."""
        with self._lock:
            return list(self._jobs.values())

    def cancel(self, key: str) -> None:
        job = self.get(key)
        if job is not None:
            job.cancel()

    def stop_all(self, timeout: float, by: str = "") -> list[Job]:
        """Cancel every running job and wait up to ``timeout`` seconds in all for them to end; returns the ones
        still running then (their work had not polled ``cancel()`` yet)."""
        running = [job for job in self.jobs() if job.running]
        for job in running:
            job.cancel(by)
        deadline = time.monotonic() + timeout
        for job in running:
            job.wait(max(0.0, deadline - time.monotonic()))
        return [job for job in running if job.running]

    def forget(self, key: str) -> None:
        """Drop a finished job (a running one is cancelled first)."""
        with self._lock:
            job = self._jobs.pop(key, None)
        if job is not None and job.running:
            job.cancel()


#: The process-wide manager every session of a Streamlit server shares.
MANAGER = JobManager()


def stop_at_exit() -> None:
    """Registered with ``atexit``: the running jobs cancelled and waited for (:data:`EXIT_WAIT_S` at most), so that
    no job thread is still inside torch while the interpreter finalises."""
    MANAGER.stop_all(EXIT_WAIT_S, by="the interpreter's exit")


atexit.register(stop_at_exit)
