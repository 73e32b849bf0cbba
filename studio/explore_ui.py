"""Explore's Streamlit glue for the panel that follows the sliders: the control bar (read into an
``explore.Setting``), the ε pass's note and progress, the λ-neighbours' views as the browser follows them
(``live_chart.Follow``) and the cancelling of the paired bootstraps they no longer need. The galleries are
``studio.explore_gallery``'s, the export buttons ``studio.explore_export``'s; the computations are
``relu_core.explore``'s; this module draws and keeps the session's state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from relu_core import detectors, explore, jobs, protocol, risk_control
from studio import page, session
from studio.live_chart import Follow, live_html, value_key
from studio.text import plain

#: How often the browser asks for the panel again while its paired bootstrap runs (a rerun of the panel's
#: fragment: a rerun of the whole page would rebuild the controls and take the keyboard focus off the λ slider).
PAIRED_POLL_S = 0.5


def chart(place, fig, stem: str, **kwargs):
    """A chart of the panel (``page.chart`` under its Explore key)."""
    return page.chart(place, fig, stem, key=session.item_key(session.EX_CHART, stem), **kwargs)


def html(markup: str, name: str, follow: Follow | None, poll_s: float | None = None) -> None:
    """HTML of the panel (a table, a caption) that may follow λ."""
    live_html(st, markup, key=session.item_key(session.EX_CHART, name), follow=follow, poll_s=poll_s)


def controls(has_model: bool, no_eps: str = "ε needs the model and the images; this run has logits only."):
    """The control bar, one row (at 1280 x 720 the charts it drives stay in the first viewport): λ, T, ε and the
    split on it, λ auto, the detectors, split seed and operating point under "More settings". Returns the setting it
    sets, the λ column (for the value "auto" gives) and a full-width slot under the controls (for the ε pass's
    note and progress: in the narrow ε column they wrapped to ten lines and pushed the page down and back).
    ``no_eps`` says why ε is off when the run has no model (the ε slider's help)."""
    session.share(session.explore_shared(has_model))  # a fragment run: a change here reaches every page
    state = st.session_state
    # a fragment run: the controls the browser has not mounted yet (under "More settings") get their values again
    session.resend_unreported(session.explore_defaults())
    with st.container(border=True):
        c_lam, c_t, c_eps, c_split, c_more = st.columns([2.6, 2.5, 1.9, 1.6, 1.8], vertical_alignment="bottom")
        c_lam.slider(
            "λ (weight of the errors)",
            0.0,
            1.0,
            step=explore.LAM_STEP,
            key=session.EX_LAM,
            disabled=state[session.EX_LAM_AUTO],
            help="The weight of the errors' soft predictions in D* (1 − λ: the correct ones'); "
            '"λ auto" under "More settings" sets it from the data.',
        )
        c_t.select_slider(
            "T (softmax temperature)",
            options=explore.TEMPERATURES,
            key=session.EX_TEMPERATURE,
            format_func=lambda t: f"{t:g}",
            help="Steps on a log scale. Applies to Rel-U and Doctor; MSP (T=1), ODIN (T=1000), Entropy and Energy "
            "(T=1) keep their standard settings. The paper's values 0.5, 1, 1.1, 1.2, 1.5, "
            "2, 5, 10, 100, 1000 are all steps.",
        )
        if not has_model:  # the slider shows the ε actually used
            state[session.EX_EPS] = 0.0
        c_eps.select_slider(
            "ε (pre-processing)",
            options=explore.EPSILONS,
            key=session.EX_EPS,
            format_func=lambda e: f"{e:g}",
            disabled=not has_model,
            help="The magnitude of the input pre-processing of Rel-U and Doctor." if has_model else no_eps,
        )
        page.fraction_slider(c_split, "tuning split", key=session.EX_TUNE_FRACTION)
        with c_more.popover(
            "More settings", help="λ auto, detectors shown, split seed, operating point", width="stretch"
        ):
            # two controls a row where they fit: at 1280 x 720 the popover shows about 410 pixels, and δ, the
            # last control, must be in them
            a1, a2 = st.columns(2, vertical_alignment="bottom")
            lam_auto = a1.checkbox(
                "λ auto",
                key=session.EX_LAM_AUTO,
                help="λ = N+ / (N+ + N−), the share of correct predictions in the tuning split (the paper's choice).",
            )
            a2.number_input("split seed", min_value=0, max_value=10_000, step=1, key=session.EX_SEED)
            st.multiselect(
                "detectors", list(explore.DETECTOR_CHOICES), format_func=detectors.label, key=session.EX_DETECTORS
            )
            o1, o2 = st.columns(2)
            o1.radio(
                "operating point",
                list(session.OP_KINDS.values()),
                key=session.EX_OP_KIND,
                help="A target TPR or coverage read on the evaluation split, or a guaranteed risk: the threshold "
                "certified on a calibration half of the evaluation split to keep at most r* errors among the "
                "predictions it accepts, with confidence 1 − δ (the other half shows what it does).",
            )
            guaranteed = state[session.EX_OP_KIND] == session.OP_KINDS["risk"]
            # every control drawn on every run (an undrawn widget loses its value), the unused ones disabled
            o2.slider("target", 0.05, 1.0, step=0.01, key=session.EX_OP_TARGET, disabled=guaranteed)
            r1, r2 = st.columns(2)
            r1.select_slider(
                "r* (risk, at most)",
                options=explore.RISKS,
                key=session.EX_OP_RISK,
                format_func=risk_control.percent,
                disabled=not guaranteed,
                help="The guaranteed risk: the share of errors among the predictions the threshold accepts, at most.",
            )
            r2.select_slider(
                "δ (confidence 1 − δ)",
                options=explore.DELTAS,
                key=session.EX_OP_DELTA,
                format_func=lambda d: f"{d:g} ({risk_control.percent(1 - d)})",
                disabled=not guaranteed,
            )
        eps_slot = st.container()
    session.keep(session.explore_defaults(), session.EX_KEPT)
    kind = {shown: kind for kind, shown in session.OP_KINDS.items()}[state[session.EX_OP_KIND]]
    setting = explore.Setting(
        temperature=state[session.EX_TEMPERATURE],
        lam="auto" if lam_auto else round(float(state[session.EX_LAM]), explore.LAM_DECIMALS),  # the slider's step
        eps=state[session.EX_EPS] if has_model else 0.0,
        tune_fraction=state[session.EX_TUNE_FRACTION],
        seed=int(state[session.EX_SEED]),
        detectors=tuple(state[session.EX_DETECTORS]) or protocol.PAIRED,
        op_kind=kind,
        op_target=state[session.EX_OP_RISK] if kind == "risk" else state[session.EX_OP_TARGET],
        op_delta=state[session.EX_OP_DELTA],
    )
    return setting, c_lam, eps_slot


# ------------------------------------------------------------------------------- ε


#: How often the browser asks for the panel again while an ε pass runs: a rerun of the panel's fragment. (A
#: fragment of its own that reran the whole page when the pass ended rebuilt the controls and took the keyboard
#: focus off the ε slider: a second arrow press did not move it.)
EPS_POLL_S = 1.0


def eps_section(run, setting: explore.Setting, slot) -> explore.EpsPass:
    """The ε pass of ``setting`` (``explore.eps_pass``, this session's memory of it); its note and progress go in
    ``slot`` side by side (one row of the control bar: at 1280 x 720 the matrices below must still fit), the bar
    staying (full) once the whole split is done, so that the page does not move when it ends."""
    memory = st.session_state.setdefault(session.EX_EPS_MEMORY, explore.EpsMemory())
    shown = explore.eps_pass(run, setting, memory, session=session.session_id())
    if setting.eps == 0:
        return shown
    with slot:
        if shown.failed:
            st.caption(plain(shown.note))
            left, right = st.columns([5, 1], vertical_alignment="center")
            left.error(plain(shown.failed))
            right.button("Retry the ε pass", key=session.EX_EPS_RETRY, on_click=memory.retry)
            return shown
        note, bar = st.columns(2, vertical_alignment="bottom")
        note.caption(plain(shown.note))
        with bar:
            if shown.job is not None:  # the step, so that the whole split's pass does not look like a restart
                step = f" ({shown.step})" if shown.step else ""
                st.progress(shown.job.fraction, text=f"updating{step}: {shown.job.label}")
                html("", "eps_poll", None, poll_s=EPS_POLL_S)  # the panel again until the pass has ended
            elif shown.done:
                st.progress(1.0, text="ε pass done")
    return shown


# ------------------------------------------------------------------------------- λ's neighbours


@dataclass(frozen=True)
class Neighbours:
    """The views of λ's neighbours keyed as the browser reads the slider (none: nothing follows λ), with what
    every element that follows λ sends beside them: the value its own view is for and the panel run's number;
    ``pending``: whether each one's paired interval is still to come (:meth:`settle_paired`)."""

    views: dict[str, explore.View]
    current: str
    run: int
    pending: dict[str, bool] = field(default_factory=dict)

    def follow(self, part: Callable[[explore.View], object]) -> Follow | None:
        """``part`` of each neighbour, for an element that follows the λ slider (None when there are none)."""
        return self._follow({k: part(v) for k, v in self.views.items()})

    def follow_paired(self) -> Follow | None:
        """The neighbours' paired tables ("computing" while their interval is to come, as the server's)."""
        return self._follow({k: explore.paired_html(v, self.pending.get(k, True)) for k, v in self.views.items()})

    def _follow(self, values: dict[str, object]) -> Follow | None:
        if not values:
            return None
        return Follow(session.EX_LAM, self.current, values, self.run, explore.LAM_DECIMALS)

    def settle_paired(self, start: bool) -> None:
        """Takes the neighbours' paired intervals that have landed; with ``start`` (once the view's own has
        landed, so that it never waits behind them) starts their missing bootstraps in the background: a
        neighbour carries its intervals from the first rerun after they land."""
        self.pending.update({k: explore.neighbour_paired(v, start=start) for k, v in self.views.items()})


def neighbours(run, setting: explore.Setting) -> Neighbours:
    """λ's neighbours (``explore.neighbour_views``); counts the panel's runs."""
    state = st.session_state
    run_number = state[session.EX_FOLLOW_RUN] = state.get(session.EX_FOLLOW_RUN, 0) + 1
    found = {value_key(lam, explore.LAM_DECIMALS): v for lam, v in explore.neighbour_views(run, setting).items()}
    return Neighbours(found, value_key(setting.lam, explore.LAM_DECIMALS) if found else "", run_number)


def cancel_superseded_paired(state, view: explore.View, shown: Neighbours) -> None:
    """Cancels the paired bootstraps this session started for views it no longer shows (a λ the slider passed
    over), so that they stop taking the CPU from the slider's reruns: with D* refitted in every resample one takes
    about a second at 10,000 samples. ``state``: the session state. A job another session still wants is started
    again when that session asks (a cancelled job is forgotten and resubmitted: ``Job.settle``)."""
    needed = {explore.paired_job_key(view), *(explore.paired_job_key(v) for v in shown.views.values())}
    for key in set(state.get(session.EX_PAIRED_KEYS, ())) - needed:
        job = jobs.MANAGER.get(key)
        if job is not None and job.running:
            job.cancel(by=str(state.get(session.SESSION_ID, "")))
    state[session.EX_PAIRED_KEYS] = needed
