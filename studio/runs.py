"""This session's runs: the list the sidebar picks from and the current one (the runs themselves live once per
process in ``relu_core.runs.RUNS``, bounded)."""

from __future__ import annotations

import streamlit as st

from relu_core import limits
from relu_core.runs import register_run
from studio import session


def run_label(run) -> str:
    """One line naming a run in the picker: what it is, its size and the start of its id (two uploads of
    different files with one name differ there)."""
    return f"{run.source} · {run.logits.shape[0]:,} samples × {run.logits.shape[1]} classes · {run.run_id[:6]}"


def session_runs() -> list[str]:
    """Run ids loaded in this browser session, oldest first."""
    return st.session_state.setdefault(session.RUN_IDS, [])


def select_run(run) -> None:
    """Register ``run`` (and record it on disk so that a shared URL can reopen it), add it to this session's
    runs and make it the current one."""
    from relu_core import runs

    if run.run_id not in session_runs():
        try:
            runs.remember(run)
        except OSError:  # a full or read-only cache: the run still works, only its link will not reopen it
            pass
    run_id = register_run(run)
    ids = session_runs()
    if run_id not in ids:
        ids.append(run_id)
        del ids[: -limits.MAX_SESSION_RUNS]
    st.session_state[session.RUN_ID] = run_id


def register_if_run(result) -> None:
    """A job's ``on_done``: a run it returns is kept for this process, whichever session is on it."""
    if hasattr(result, "run_id"):
        register_run(result)
