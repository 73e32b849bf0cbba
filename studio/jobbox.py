"""Long work as background jobs (``relu_core.jobs``) seen from a page: the progress box with its Cancel button,
starting, joining and picking up jobs, the sidebar's jobs panel, and a study page's result.

A job runs in a worker thread: leaving the page does not stop it. A run a job returns joins the session's run
list when it ends, whatever page the session is on then; failures and cancellations are said once in the
sidebar, and a cancellation also where its Cancel button was pressed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.scriptrunner import get_script_run_ctx

from relu_core import explore, jobs, limits
from relu_core.errors import USER_ERRORS, unexpected, user_message
from relu_core.registry import LRURegistry
from relu_core.runs import register_run
from studio import runs, session
from studio.text import plain


def show_error(exc: BaseException, task: str = "this page") -> None:
    """The one-line message of a user error (no traceback); any other exception is logged on the server with
    its traceback and shown as one line with a short reference (``errors.unexpected``)."""
    if not isinstance(exc, USER_ERRORS):
        st.error(plain(unexpected(exc, task)))
        return
    st.error(plain(user_message(exc)))


def _cancelled_here() -> set[str]:
    """Keys of the jobs cancelled from their progress box in this session, their cancellation not said yet."""
    return st.session_state.setdefault(session.CANCELLED_HERE, set())


def _cancel_from_box(job: jobs.Job) -> None:
    _cancelled_here().add(job.key)
    job.cancel(by=session.session_id())


def _cancelled_text(job: jobs.Job) -> str:
    """Who cancelled ``job``, for its sharers: a job is shared by every session asking for the same work."""
    elsewhere = job.cancelled_by and job.cancelled_by != session.session_id()
    return "cancelled from another browser session" if elsewhere else "cancelled"


def wait_for(job: jobs.Job) -> bool:
    """Block this script run on ``job`` with a progress bar and a Cancel button, in a box that disappears when
    the job ends: at the top of the page (:func:`status_area`) in a full script run, else where it is called. The
    job itself runs in a worker thread: leaving the page does not stop it.

    A job cancelled from this box is said here, where Cancel was pressed (the rerun that the button starts
    comes back to this box): returns True when it said so."""
    if job.running:
        box = _top_slot() or st.empty()
        with box.container(border=True):
            st.markdown(f"**{plain(job.label)}** on {explore.device_name()}")
            bar = st.progress(job.fraction, text=plain(job.message))
            st.button("Cancel", key=session.item_key(session.CANCEL, job.key), on_click=_cancel_from_box, args=(job,))
            st.caption(
                "Runs in the background: it goes on if you leave this page, and the jobs panel in the "
                "sidebar follows it."
            )
        while not job.wait(0.25):
            bar.progress(job.fraction, text=plain(job.message))
        box.empty()
    if job.key not in _cancelled_here() or job.state == jobs.RUNNING:
        return False
    _cancelled_here().discard(job.key)
    if job.state != jobs.CANCELLED:  # it ended before the cancellation reached it
        return False
    _say_cancelled(job)
    return True


def _say_cancelled(job: jobs.Job) -> None:
    st.warning(plain(f"{job.label}: {_cancelled_text(job)}."))


def start_job(
    key: str,
    label: str,
    work: Callable[[Callable, Callable], object],
    *,
    select: bool = True,
    group: str = "",
    place: str = "",
) -> jobs.Job:
    """Start (or join: same ``key``, same job) a background job; a run it returns joins this session's run list
    (and becomes current with ``select``) when it is done, whatever page the session is on then. With ``place``
    (a sidebar form's name: an upload) its failure or cancellation is said there, beside what the user pressed
    (:func:`placed_messages`), not at the top of the sidebar."""
    job = jobs.MANAGER.submit(key, label, work, group=group, on_done=runs.register_if_run)
    st.session_state.setdefault(session.PENDING_JOBS, {})[key] = select
    if place:
        st.session_state.setdefault(session.JOB_PLACES, {})[key] = place
    return job


def adopt_finished_jobs() -> None:
    """Runs of this session's finished jobs join its run list; each job's end (done, failed, cancelled) is
    reported once."""
    pending: dict[str, bool] = st.session_state.setdefault(session.PENDING_JOBS, {})
    places: dict[str, str] = st.session_state.setdefault(session.JOB_PLACES, {})
    for key, select in list(pending.items()):
        job = jobs.MANAGER.get(key)
        if job is not None and job.running:
            continue
        del pending[key]
        place = places.pop(key, "")
        if job is None:
            continue
        messages = (
            st.session_state.setdefault(session.PLACED_MESSAGES, {}).setdefault(place, [])
            if place and job.state != jobs.DONE
            else st.session_state.setdefault(session.JOB_MESSAGES, [])
        )
        if job.state == jobs.DONE and hasattr(job.result, "run_id"):
            register_run(job.result)
            if select:
                runs.select_run(job.result)
            elif job.result.run_id not in runs.session_runs():
                runs.session_runs().append(job.result.run_id)
            where = "now the current run" if select else "added to the run list"
            messages.append(("success", f"{job.label}: done, {where} ({runs.run_label(job.result)})."))
        elif job.state == jobs.FAILED:  # kept: a study's page shows it too on its next visit (asking again retries)
            messages.append(("error", f"{job.label} failed: {job.error}"))
        elif job.state == jobs.CANCELLED:
            messages.append(("warning", f"{job.label}: {_cancelled_text(job)}."))


def job_rows(running: list[jobs.Job]) -> list[tuple[str, str, float, list[jobs.Job]]]:
    """The rows that list ``running`` jobs: one per label and message (jobs that read the same are one row, "×2"
    after its label, not two identical ones), in the order of their first job: the row's label, its message, its
    mean progress and its jobs."""
    groups: dict[tuple[str, str], list[jobs.Job]] = {}
    for job in running:
        groups.setdefault((job.label, job.message), []).append(job)
    return [
        (
            f"{label}{f' (×{len(group)})' if len(group) > 1 else ''}",
            message,
            sum(job.fraction for job in group) / len(group),
            group,
        )
        for (label, message), group in groups.items()
    ]


def _cancel_all(group: list[jobs.Job], by: str) -> None:
    for job in group:
        job.cancel(by=by)


@st.fragment(run_every=1.0)
def _running_jobs_panel() -> None:
    pending = st.session_state.get(session.PENDING_JOBS, {})
    running = [job for job in jobs.MANAGER.jobs() if job.running]
    if not any(job.key in pending for job in running) and pending:
        st.rerun()  # one of this session's jobs ended: the whole page picks up its run
    for label, message, fraction, group in job_rows(running):
        st.progress(fraction, text=plain(f"{label}: {message}"))
        st.button(
            "Cancel",
            key=session.item_key(session.CANCEL_PANEL, group[0].key),
            on_click=_cancel_all,
            args=(group, session.session_id()),
        )


#: A job shows in the status area once it has run this long (a slider's short jobs do not flash there).
STATUS_AFTER_S = 1.0
#: The most jobs the status area lists (the jobs panel in the sidebar lists every one).
STATUS_MAX = 3


def status_area() -> DeltaGenerator:
    """The top of the page, drawn first by the frame: the slot where a page waiting on a job shows its progress
    box (:func:`wait_for`), then the running work the page does not show itself (:func:`running_work`)."""
    area = st.container()
    st.session_state[session.STATUS_SLOT] = area.empty()
    return area


def _top_slot():
    """The status area's slot of this full script run (None in a fragment's run: it belongs to the last full
    run, and a fragment may not draw outside itself)."""
    ctx = get_script_run_ctx()
    if ctx is None or ctx.fragment_ids_this_run:
        return None
    return st.session_state.get(session.STATUS_SLOT)


def _long_running(own: tuple[str, ...]) -> list[jobs.Job]:
    now = time.monotonic()
    return [
        job
        for job in jobs.MANAGER.jobs()
        if job.running and now - job.started >= STATUS_AFTER_S and not job.key.startswith(own)
    ]


@st.fragment(run_every=1.0)
def _running_rows(own: tuple[str, ...]) -> None:
    rows = job_rows(_long_running(own))
    for label, message, fraction, _ in rows[:STATUS_MAX]:
        st.progress(fraction, text=f"Running: {label} ({message})")
    if len(rows) > STATUS_MAX:
        st.caption(f"and {len(rows) - STATUS_MAX} more running: see the jobs panel in the sidebar")


def running_work(area: DeltaGenerator, own: tuple[str, ...]) -> None:
    """In the status ``area``, the progress of the work running in the background, refreshed every second while
    there is any, but the jobs whose keys start with one of ``own`` (the page shows those itself) and those that
    started less than :data:`STATUS_AFTER_S` ago."""
    if any(job.running for job in jobs.MANAGER.jobs()):
        with area:
            _running_rows(own)


def jobs_panel() -> None:
    """The sidebar's jobs: running ones with progress and Cancel (refreshed every second), then this session's
    messages of jobs that ended (each shown once)."""
    adopt_finished_jobs()
    running = any(job.running for job in jobs.MANAGER.jobs())
    messages = st.session_state.get(session.JOB_MESSAGES, [])
    if not running and not messages:
        return
    st.subheader("Jobs")
    if running:
        _running_jobs_panel()
    for kind, text in messages:
        {"error": st.error, "warning": st.warning, "success": st.success}[kind](plain(text))
    messages.clear()


def placed_messages(place: str) -> None:
    """The failures and cancellations of the jobs started with ``place`` (:func:`start_job`), each said once, here:
    in the sidebar form whose button started them."""
    for kind, text in st.session_state.get(session.PLACED_MESSAGES, {}).pop(place, []):
        {"error": st.error, "warning": st.warning}[kind](plain(text))


def run_job(label: str, job: Callable[[Callable, Callable], object], *, key: str, select: bool = True):
    """Run ``job(progress, cancel)`` as the background job ``key`` (naming the computation and every setting it
    depends on, :func:`start_job`) and wait for it in a progress box with the device and a Cancel button.

    Returns the job's result (a run is registered and, with ``select``, made current), or None after a user
    error (``st.error`` with its one-line message) or a cancellation; the previous run stays current either
    way, so nothing already computed is lost. The job goes on when the page is left, :func:`job_result` picks
    it up on a later visit, and a cancellation or failure that happens meanwhile is reported once in the sidebar.
    """
    handle = start_job(key, label, job, select=select)
    return _finished(handle, select, said=wait_for(handle))


def _finished(handle: jobs.Job, select: bool = False, said: bool = False):
    """The result of an ended job of this session's (None after a failure or a cancellation, said here once
    unless ``said`` already); a run it returns is made current with ``select``."""
    st.session_state.setdefault(session.PENDING_JOBS, {}).pop(handle.key, None)
    if handle.state == jobs.DONE:
        if select and hasattr(handle.result, "run_id"):
            runs.select_run(handle.result)
        return handle.result
    if handle.state == jobs.FAILED:
        st.error(plain(handle.error))  # one line: the user's error, or errors.unexpected's with its reference
    elif not said:
        _say_cancelled(handle)
    jobs.MANAGER.forget(handle.key)  # asking again retries
    return None


def job_result(key: str):
    """The result of the background job ``key`` once it has ended (a running one shows its progress box
    until then, e.g. a study started before the page was left); None when there is none or it failed."""
    handle = jobs.MANAGER.get(key)
    if handle is None:
        return None
    return _finished(handle, said=wait_for(handle))


def study_result(
    page: str,
    scope,
    settings,
    pressed: bool,
    label: str,
    work: Callable[[Callable, Callable], object],
    found: Callable[[], object | None] | None = None,
):
    """A study page's result to show and whether it is for the current ``settings``: ``(result, current)``, or
    ``(None, False)`` when there is none yet.

    ``pressed`` (its Run button) starts ``work`` as a background job keyed by ``page``, ``scope`` (the run, and
    the study where a page has several) and ``settings``; a job for these settings that finished while the page
    was left is picked up, and so is ``found()``, the result of exactly these settings computed elsewhere (the
    Start page's scorecard). Otherwise the page keeps showing the last result in ``scope``, which is stale when
    the settings changed since. Results are kept per session, least recently used dropped.
    """
    key = f"{page}:{scope}:{settings}"
    result = run_job(label, work, select=False, key=key) if pressed else job_result(key)
    if result is None and not pressed and found is not None:
        result = found()
    results = st.session_state.setdefault(session.results_key(page), LRURegistry(limits.MAX_SESSION_RUNS))
    last = st.session_state.setdefault(session.last_key(page), {})
    if result is not None:
        results[(scope, settings)] = result
        last[scope] = settings
    shown = settings if (scope, settings) in results else last.get(scope)
    if shown is None or (scope, shown) not in results:
        return None, False
    return results[(scope, shown)], shown == settings


def study_run(
    page: str,
    scope,
    settings,
    label: str,
    work: Callable[[Callable, Callable], object],
    *,
    ready: bool = True,
    hint: str = "",
    found: Callable[[], object | None] | None = None,
):
    """A study page's **Run the study** button (disabled unless ``ready``) and the result to show
    (:func:`study_result`, ``found`` included), or None before the first run, with a line asking to press the
    button (then ``hint``; not under the refusal or cancellation of the run just pressed); a result computed with
    other settings is shown with a line saying so."""
    pressed = st.button("Run the study", key=session.run_button_key(page), type="primary", disabled=not ready)
    result, current = study_result(page, scope, settings, pressed, label, work, found)
    if result is None and not pressed:  # after a press, the failure or cancellation said above is the news
        st.info(f"Press **Run the study**. {hint}".rstrip())
    elif not current:
        st.info("The settings changed since this study was run: press **Run the study** to update it.")
    return result
