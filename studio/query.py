"""The URL's query parameters: Explore's settings (``lam``, ``T``, ``eps``, ``tune``, ``seed``) and its run
(``run``, ``run_name``), read on a session's first view and written back as the view changes, so that a link
can be shared."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import streamlit as st

from relu_core import explore, jobs, runs
from studio import session
from studio.jobbox import wait_for
from studio.runs import register_if_run, select_run


def _parse_float(text: str | None, allowed: Sequence[float] | None, low: float, high: float) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or not low <= value <= high:
        return None
    if allowed is not None:
        value = min(allowed, key=lambda a: abs(math.log10(a + 1e-12) - math.log10(value + 1e-12)))
    return value


def init_from_query_params() -> None:
    """Seed the Explore widgets from the URL (``lam``, ``T``, ``eps``, ``tune``, ``seed``) on a session's first
    view; invalid values fall back to the defaults."""
    if st.session_state.get(session.QUERY_PARAMS_READ):
        return
    st.session_state[session.QUERY_PARAMS_READ] = True
    params = st.query_params
    lam = params.get("lam")
    if lam == "auto":
        st.session_state[session.EX_LAM_AUTO] = True
    elif (value := _parse_float(lam, None, 0.0, 1.0)) is not None:
        st.session_state[session.EX_LAM], st.session_state[session.EX_LAM_AUTO] = round(value, 2), False
    if (value := _parse_float(params.get("T"), explore.TEMPERATURES, 0.1, 1000.0)) is not None:
        st.session_state[session.EX_TEMPERATURE] = value
    if (value := _parse_float(params.get("eps"), None, 0.0, 0.004)) is not None:
        st.session_state[session.EX_EPS] = min(explore.EPSILONS, key=lambda e: abs(e - value))
    if (value := _parse_float(params.get("tune"), None, 0.05, 0.95)) is not None:
        st.session_state[session.EX_TUNE_FRACTION] = round(value, 2)
    seed = params.get("seed")
    if seed is not None and seed.isdigit():
        st.session_state[session.EX_SEED] = int(seed)


def open_run_from_query() -> None:
    """On a session's first view, a URL naming a run (``run``, a run id) makes it current: reopened from this
    machine's record of it (``runs.reopen``: cached logits, so quick) or, when the machine has none, a notice
    naming the run the link needs (``run_name``) shown above the page (:func:`query_run_notice`)."""
    if st.session_state.get(session.QUERY_RUN_READ):
        return
    st.session_state[session.QUERY_RUN_READ] = True
    run_id, name = st.query_params.get("run"), st.query_params.get("run_name")
    if not run_id or run_id == st.session_state.get(session.RUN_ID):
        return
    if run_id in runs.RUNS:
        select_run(runs.RUNS[run_id])
        return
    known = runs.describe(run_id) if re.fullmatch(r"[0-9a-f]{16}", run_id) else None
    if known is None:
        st.session_state[session.QUERY_RUN_NOTICE] = (
            f"This link is for run {run_id[:16]}" + (f" ({name[:200]})" if name else "") + ", which is not on this "
            "machine (runs of an uploaded model are not kept when the server restarts). Showing the current run "
            "instead; to see the linked one, compute or upload the same model and data set (or logits) here: the "
            "run id is a hash of them."
        )
        return
    job = jobs.MANAGER.submit(
        f"reopen:{run_id}",
        f"Reopening the linked run: {known}",
        lambda progress, cancel: runs.reopen(run_id, progress, cancel),
        on_done=register_if_run,
    )
    wait_for(job)
    if job.state == jobs.DONE:
        select_run(job.result)
    else:
        st.session_state[session.QUERY_RUN_NOTICE] = (
            f"The linked run {run_id} ({known}) could not be reopened: {job.error}"
        )
        jobs.MANAGER.forget(job.key)


def query_run_notice() -> None:
    """The notice of :func:`open_run_from_query`, while the session has not moved to another run."""
    if st.session_state.get(session.QUERY_RUN_NOTICE):
        st.warning(st.session_state[session.QUERY_RUN_NOTICE])


def write_query_params(setting, run=None) -> None:
    """Keep the view's ``setting`` (an ``explore.Setting``) in the URL so it can be shared and, with ``run``, its
    id and name."""
    wanted = {
        "lam": setting.lam_words(),
        "T": f"{setting.temperature:g}",
        "eps": f"{setting.eps:g}",
        "tune": f"{setting.tune_fraction:g}",
        "seed": str(setting.seed),
    }
    if run is not None:
        wanted.update(run=run.run_id, run_name=run.source[:200])
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)
