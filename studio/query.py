"""The URL's query parameters: Explore's settings (``lam``, ``T``, ``eps``, ``tune``, ``seed``; ``risk`` and
``delta`` when the operating point is a guaranteed risk) and its run (``run``, ``run_name``), read on a session's
first view and written back as the view changes, so that a link can be shared; and the one-shot parameters a page
link carries (``study=`` for Studies, ``guarantee=`` for Explore), taken out of the URL once read."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import streamlit as st

from relu_core import explore, jobs, protocol, risk_control, runs
from relu_core.errors import InputError
from studio import session
from studio.jobbox import wait_for
from studio.runs import register_if_run, select_run
from studio.text import plain

#: The split seed's range in a URL (the Explore control's).
SEED_MAX = 10_000


def _nearest(value: float, choices: Sequence[float], log: bool = False) -> float:
    """The choice nearest ``value`` (on a log scale with ``log``: temperatures)."""
    if log:
        return min(choices, key=lambda c: abs(math.log10(c) - math.log10(value)))
    return min(choices, key=lambda c: abs(c - value))


def parse_param(name: str, text: str) -> object:
    """One URL value of Explore as its control takes it, or ValueError saying what is wrong (the one validator
    of every ``lam``, ``T``, ``eps``, ``tune`` and ``seed``). Grid values go to the nearest choice of the
    control: T on a log scale, ε and the tuning fraction (its presets, e.g. 0.51 -> 0.5) on a linear one."""
    text = text.strip()
    if name in ("risk", "delta"):  # the guaranteed risk's r* and δ: the control's nearest choice
        try:
            value = float(text) if len(text) <= 32 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not 0 < value < 1:
            raise ValueError("a number strictly between 0 and 1")
        if name == "risk":  # an r* no sample size certifies (even at the loosest δ) is refused, not rounded up
            try:
                risk_control.check_certifiable(value, max(explore.DELTAS))
            except InputError as error:
                raise ValueError(f"an r* that some sample size can certify ({error})") from None
        return _nearest(value, explore.RISKS if name == "risk" else explore.DELTAS)
    if name == "lam" and text == "auto":
        return "auto"
    if name == "seed":
        if not re.fullmatch(r"[0-9]{1,5}", text) or int(text) > SEED_MAX:  # ASCII digits only: "²" is no seed
            raise ValueError(f"a whole number from 0 to {SEED_MAX:,}")
        return int(text)
    ranges = {"lam": (0.0, 1.0), "T": (0.1, 1000.0), "eps": (0.0, max(explore.EPSILONS)), "tune": (0.05, 0.95)}
    low, high = ranges[name]
    try:
        value = float(text) if len(text) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"a number from {low:g} to {high:g}" + (" or auto" if name == "lam" else ""))
    if name == "lam":
        return round(value, explore.LAM_DECIMALS)
    if name == "T":
        return _nearest(value, explore.TEMPERATURES, log=True)
    if name == "eps":
        return _nearest(value, explore.EPSILONS)
    return _nearest(value, protocol.TUNE_FRACTION_PRESETS)


#: The session-state key each URL parameter seeds.
_PARAM_KEYS = {
    "lam": session.EX_LAM,
    "T": session.EX_TEMPERATURE,
    "eps": session.EX_EPS,
    "tune": session.EX_TUNE_FRACTION,
    "seed": session.EX_SEED,
    "risk": session.EX_OP_RISK,
    "delta": session.EX_OP_DELTA,
}


def init_from_query_params() -> None:
    """Seed the Explore widgets from the URL (``lam``, ``T``, ``eps``, ``tune``, ``seed``) on a session's first
    view (:func:`parse_param`). A malformed or out-of-range value keeps the control's default and is named in a
    notice above the page; a value moved to the control's nearest choice is named too."""
    if st.session_state.get(session.QUERY_PARAMS_READ):
        return
    st.session_state[session.QUERY_PARAMS_READ] = True
    notes = []
    for name, key in _PARAM_KEYS.items():
        text = st.query_params.get(name)
        if text is None:
            continue
        # only digits, letters, ".", "+" and "-" are echoed: a link cannot put Markdown into the notice
        shown = re.sub(r"[^0-9A-Za-z.+-]", "?", text[:24]) + ("…" if len(text) > 24 else "")
        try:
            value = parse_param(name, text)
        except ValueError as exc:
            notes.append(f"{name}={shown} is not {exc}: the default is used")
            continue
        if value == "auto":
            st.session_state[session.EX_LAM_AUTO] = True
            continue
        if name == "lam":
            st.session_state[session.EX_LAM_AUTO] = False
        elif name == "risk":  # a link with r* opens the guaranteed-risk operating point
            st.session_state[session.EX_OP_KIND] = session.OP_KINDS["risk"]
        if name != "lam" and value != float(text):
            notes.append(f"{name}={shown} is not one of the control's values: {value:g} is used")
        st.session_state[key] = value
    if notes:
        st.session_state[session.QUERY_PARAMS_NOTICE] = "This link's settings: " + "; ".join(notes) + "."


def query_params_notice() -> None:
    """The notice of :func:`init_from_query_params` (its echoed values hold no Markdown)."""
    if st.session_state.get(session.QUERY_PARAMS_NOTICE):
        st.warning(plain(st.session_state[session.QUERY_PARAMS_NOTICE]))


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
        st.warning(plain(st.session_state[session.QUERY_RUN_NOTICE]))


def write_run_param(run) -> None:
    """Keep the current ``run``'s id and name in the URL on every page, so that a link copied from any page
    opens the run it showed (:func:`open_run_from_query`)."""
    wanted = {"run": run.run_id, "run_name": run.source[:200]}
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)


def take_study_param() -> str | None:
    """The study a link asks the Studies page to open (``study=``: the Start scorecard's link of its mismatch row),
    once: taken out of the URL, so that the page's own choices are not reset on its next run."""
    wanted = st.query_params.get("study")
    if wanted is not None:
        del st.query_params["study"]
    return wanted


def take_guarantee_param() -> None:
    """The guaranteed risk a link asks Explore to open at (``guarantee=R,D``: the Start scorecard's row, whose r*
    and δ are among Explore's choices), once: the operating point becomes that guaranteed risk and the parameter
    leaves the URL, so that the page's own choices are not reset on its next run. A malformed value is ignored
    (the link is the app's own)."""
    if st.query_params.get("op") == "errors":  # the errors-caught operating point (errors positive)
        st.session_state[session.EX_OP_KIND] = session.OP_KINDS["errors"]
    wanted = st.query_params.get("guarantee")
    if wanted is None:
        return
    del st.query_params["guarantee"]
    try:
        risk, delta = (parse_param(name, text) for name, text in zip(("risk", "delta"), wanted.split(","), strict=True))
    except ValueError:
        return
    st.session_state[session.EX_OP_KIND] = session.OP_KINDS["risk"]
    st.session_state[session.EX_OP_RISK], st.session_state[session.EX_OP_DELTA] = risk, delta


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
    if setting.op_kind == "errors":  # the operating point's convention travels with the link
        wanted["op"] = "errors"
    elif "op" in st.query_params:
        del st.query_params["op"]
    if setting.op_kind == "risk":
        wanted.update(risk=f"{setting.op_target:g}", delta=f"{setting.op_delta:g}")
    else:  # another operating point: a link must not reopen the guaranteed risk
        for name in ("risk", "delta"):
            if name in st.query_params:
                del st.query_params[name]
    if run is not None:
        wanted.update(run=run.run_id, run_name=run.source[:200])
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)
