"""Every session-state key the shared glue uses, declared in one place.

Widget keys are session-state keys too. Each page prefixes its own (widgets, defaults, results) so that two
pages never share a key by accident: Start ``start_``, Corruptions ``rob_``, Studies ``study_``, Baselines
``bl_``, the sidebar ``pick_`` / ``upload_`` / ``compute_`` / ``load_``; Explore's settings keep the short
names below, which its URL parameters set. The keys here are the ones several modules (or a page and the
glue) read and write.
"""

from __future__ import annotations

import uuid

import streamlit as st

# ---- runs (studio.runs, studio.sidebar)
#: The current run's id.
RUN_ID = "run_id"
#: The run ids loaded in this session, oldest first.
RUN_IDS = "run_ids"
#: The sidebar's run picker (follows ``RUN_ID``).
RUN_PICKER = "run_picker"

# ---- jobs (studio.jobbox)
#: This session's background jobs whose run is still to be adopted: job key -> make it current.
PENDING_JOBS = "pending_jobs"
#: This session's failure and cancellation messages for the sidebar: (kind, text), each shown once.
JOB_MESSAGES = "job_messages"
#: Jobs cancelled from their own progress box, their cancellation still to be said there (``jobbox.wait_for``).
CANCELLED_HERE = "cancelled_here"
#: A random id of this session (groups its ε passes so that a new one cancels the previous ones).
SESSION_ID = "_session_key"

# ---- URL query parameters (studio.query); Explore's widgets are seeded from them
QUERY_PARAMS_READ = "_query_params_read"
QUERY_RUN_READ = "_query_run_read"
QUERY_RUN_NOTICE = "_query_run_notice"
#: Explore's widgets that the URL sets (``lam``, ``T``, ``eps``, ``tune``, ``seed``).
LAM, LAM_AUTO, TEMPERATURE, EPS, TUNE_FRACTION, SEED = "lam", "lam_auto", "temperature", "eps", "tune_fraction", "seed"


def results_key(page: str) -> str:
    """A study page's results (``jobbox.study_result``), least recently used dropped."""
    return f"{page}_results"


def last_key(page: str) -> str:
    """A study page's last settings per scope (``jobbox.study_result``)."""
    return f"{page}_last"


def session_id() -> str:
    """This session's random id (made on first use)."""
    return st.session_state.setdefault(SESSION_ID, uuid.uuid4().hex)
