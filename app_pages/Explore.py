"""Explore: Rel-U against Doctor (and the baselines) on the current run, live as λ, T, ε and the split move."""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from relu_core import comparison, detectors, explore, figures, jobs, metrics, protocol, report
from relu_core.errors import Cancelled, InputError
from relu_core.registry import LRURegistry
from studio import frame, jobbox, page, query, runs, session
from studio.live_chart import Follow, live_html, value_key

_LOG = logging.getLogger(__name__)

run = frame.current_run()
query.init_from_query_params()

st.title("Explore: Rel-U vs Doctor")
st.caption(f"Run: {runs.run_label(run)}")

session.restore(session.explore_defaults(), session.EX_KEPT)  # the controls survive a visit to another page


def _chart(fig, stem: str, **kwargs):
    return page.chart(st, fig, stem, key=session.item_key(session.EX_CHART, stem), **kwargs)


def _html(html: str, name: str, follow: Follow | None, poll_s: float | None = None) -> None:
    live_html(st, html, key=session.item_key(session.EX_CHART, name), follow=follow, poll_s=poll_s)


@dataclass(frozen=True)
class EpsPass:
    """What the panels show under input pre-processing: ``perturbed`` is the best finished result for this
    setting (None: none yet, the clean scores are shown), on ``subset`` of the evaluation split (None: the whole
    split); ``note`` says what is shown; ``job`` is the pass still running (None when none), ``step`` its place
    among the passes ("step 2 of 2"; "" when there is one) and ``done`` whether the whole split's result for
    this ε is the one shown; ``failed`` the message of a pass of this setting that failed ("" when none: it is not
    asked again until the user retries)."""

    perturbed: dict | None
    subset: np.ndarray | None
    note: str
    job: jobs.Job | None = None
    step: str = ""
    done: bool = False
    failed: str = ""


def _eps_inputs(run_id: str, temperature: float, lam, tune_fraction: float, seed: int, eps: float) -> EpsPass:
    """The ε pass of this setting, never blocking. It runs as background jobs (``explore.eps_job``): on CPU a
    stated subsample of the evaluation split first, then the whole split; while a new value runs, the previous
    result of this view stays on screen."""
    settings = (run_id, temperature, lam, tune_fraction, seed)
    subset = explore.eps_subsample(run_id, tune_fraction, seed)
    stages = ([subset] if subset is not None else []) + [None]
    failures = st.session_state.setdefault(session.EX_EPS_FAILED, {})  # job key -> message, until a retry
    shown, pending, step, failed = None, None, "", ""
    for n, stage in enumerate(stages):
        key = explore.eps_job_key(run_id, temperature, lam, tune_fraction, seed, eps, stage)
        if key in failures:
            failed = failures[key]
            break
        job = explore.eps_job(run_id, temperature, lam, tune_fraction, seed, eps, stage, session=session.session_id())
        if job.state == jobs.DONE:
            shown = (job.result, stage, eps)
            continue
        if job.state == jobs.FAILED:
            failed = failures[key] = job.error
            jobs.MANAGER.forget(job.key)  # another session asking for it tries again
        else:
            pending, step = job, f"step {n + 1} of {len(stages)}" if len(stages) > 1 else ""
        break
    last = st.session_state.get(session.EX_EPS_LAST)
    if shown is not None:
        st.session_state[session.EX_EPS_LAST] = (settings, shown)
    elif last is not None and last[0] == settings:
        shown = last[1]
    state = f"ε = {eps:g} could not be computed" if failed else f"ε = {eps:g} is being computed"
    if shown is None:
        return EpsPass(None, None, f"{state}; shown meanwhile: clean scores (ε = 0)", pending, step, failed=failed)
    perturbed, stage, shown_eps = shown
    where = "the whole evaluation split" if stage is None else f"a subsample of {stage.size:,} evaluation images"
    note = f"ε = {shown_eps:g} on {where}"
    if shown_eps != eps or failed:
        note = f"{state}; shown meanwhile: {note}"
    return EpsPass(perturbed, stage, note, pending, step, done=shown_eps == eps and stage is None, failed=failed)


def _view(
    run_id: str, temperature: float, lam, tune_fraction: float, seed: int, keys: list[str], perturbed, subset
) -> explore.ExploreView:
    """``explore.explore`` for this setting, kept for the session when it uses the clean scores: the widgets that
    leave the setting alone (operating point, galleries, toggles) reuse its curves and paired bootstrap."""
    if perturbed is not None:  # ε results arrive in stages from background jobs: always recomputed
        return explore.explore(run_id, temperature, lam, tune_fraction, seed, keys, perturbed, subset)
    store = st.session_state.setdefault(session.EX_VIEWS, LRURegistry(8))  # a λ and its neighbours, twice
    key = (run_id, temperature, lam, tune_fraction, seed, tuple(keys))
    if key not in store:
        store[key] = explore.explore(run_id, temperature, lam, tune_fraction, seed, keys)
    return store[key]


#: The detail tabs under the metrics. Only the open one is computed and drawn: every element of the panel is
#: redrawn on each slider move, and the galleries and the operating table were about a third of them.
DETAIL_TABS = ("Operating point", "Samples of a confusion cell", "Errors only one detector catches")

#: How long the tables wait for the paired bootstrap before showing it when it lands instead, and how often the
#: browser asks for the panel again meanwhile (a rerun of the panel's fragment: a rerun of the whole page would
#: rebuild the controls and take the keyboard focus off the λ slider).
PAIRED_WAIT_S = 0.3
PAIRED_POLL_S = 0.5


@st.fragment(run_every=1.0)
def _eps_watch(key: str, step: str) -> None:
    """The "updating" mark of a running ε pass (with its ``step``, so that the whole split's pass after the
    subsample's does not look like a restart); reruns the page once the pass has ended."""
    job = jobs.MANAGER.get(key)
    if job is None or not job.running:
        st.rerun()
    st.progress(job.fraction, text=f"updating{f' ({step})' if step else ''}: {job.label}")


def _gallery(
    indices: np.ndarray,
    view: explore.ExploreView,
    keys: list[str],
    class_names,
    *,
    limit: int = 24,
    columns: int = 8,
    name_classes: bool = True,
) -> None:
    """Images (or a table for logits-only runs) captioned with their index, true → predicted class (unless
    ``name_classes`` is False: a confusion cell's samples share them) and each detector's score."""
    run_ = explore.get_run(view.run_id)
    if indices.size == 0:
        st.info("No samples here.")
        return
    shown = indices[:limit]
    labels = run_.labels
    if run_.images is None:
        table = pd.DataFrame(
            {
                "sample": shown,
                "true": [class_names[labels[i]] for i in shown],
                "predicted": [class_names[view.predictions[i]] for i in shown],
            }
        )
        for key in keys:
            table[view.detectors[key].name] = view.detectors[key].uncertainty[shown]
        st.dataframe(table, hide_index=True)
        return
    grid = st.columns(columns)
    for n, i in enumerate(shown):
        classes = [f"{class_names[labels[i]]} → {class_names[view.predictions[i]]}"] if name_classes else []
        scores = [f"{view.detectors[k].name} {view.detectors[k].uncertainty[i]:.3g}" for k in keys]
        grid[n % columns].image(explore.thumbnail(run_.images[i]), caption=" · ".join([f"#{i}", *classes, *scores]))
    if indices.size > limit:
        st.caption(f"showing {limit} of {indices.size}")


def _export_buttons(
    run_, view: explore.ExploreView, figs: dict, table: pd.DataFrame, operating_of: Callable, settings: dict
) -> None:
    """One row: the view's data as a ZIP (built when clicked) and "Download report", the current view as one
    self-contained HTML file (built on demand: it holds plotly.js, about 5 MB, so it is not rebuilt on every
    slider move). Each chart's camera button saves its PNG. Few elements: every one is redrawn on each move.
    ``operating_of()`` makes the operating-point table (only when one of them is built)."""

    def paired() -> dict:
        return view.paired or explore.paired_for(view, int(settings["split seed"]))

    def view_zip() -> bytes:
        files = explore.view_files(
            view,
            figs,
            table,
            settings,
            list(run_.class_names),
            paired=paired(),
            operating=operating_of(),
            provenance=report.provenance(run_),
        )
        return report.data_zip(files)

    row = st.container(horizontal=True)
    row.download_button(
        "Data of this view (ZIP)",
        view_zip,
        file_name=page.run_tagged("relu_studio_view.zip"),
        mime="application/zip",
        on_click="ignore",
        key=session.EX_DL_DATA,
        help="D* (CSV, .npy), the data of every chart, the metrics, Rel-U − Doctor with its intervals and the "
        "operating point (CSV), and the settings with the run's provenance (JSON).",
    )
    wanted = (view.run_id, tuple(settings.items()))
    if row.button(
        "Download report",
        key=session.EX_BUILD_REPORT,
        help="One HTML file of this view (interactive figures, "
        "metrics with intervals, settings, provenance) that opens offline.",
    ):
        differences, operating = paired(), operating_of()
        verdict = "Rel-U vs Doctor: " + "; ".join(differences[m].verdict() for m in ("auroc", "fpr95", "aurc")) + "."
        st.session_state[session.EX_REPORT_HTML] = (
            wanted,
            report.render_html(
                title=f"Rel-U Studio report: {run_.source or run_.run_id}",
                verdict=verdict,
                settings=settings,
                provenance_info=report.provenance(run_),
                figs=list(figs.values()),
                metrics_table=table,
                paired=differences,
                operating_table=operating,
                operating_note=OPERATING_NOTE.format(what=settings["operating point"]),
            ),
        )
    built = st.session_state.get(session.EX_REPORT_HTML)
    if built is not None and built[0] == wanted:
        row.download_button(
            "Save report (HTML)",
            built[1],
            file_name=page.run_tagged("relu_studio_report.html"),
            mime="text/html",
            on_click="ignore",
            key=session.EX_DL_REPORT,
            type="primary",
        )


#: The λ slider's step. λ's neighbours, one step each way, are sent with each view: the browser shows them the
#: moment the slider reaches them, before the server reruns (``studio.live_chart.Follow``).
LAM_STEP, LAM_DECIMALS = 0.01, 2


@dataclass(frozen=True)
class Settings:
    """What the controls set: the view's setting (λ is "auto" or a float) and the operating point."""

    lam: float | str
    temperature: float
    eps: float
    tune_fraction: float
    seed: int
    keys: list[str]
    op_kind: str  # "tpr" or "coverage"
    op_target: float


def _controls(has_model: bool):
    """The control bar; returns the settings, the λ column (for the value "auto" gives) and a full-width slot
    under the controls (for the ε pass's note and progress: in the narrow ε column they wrapped to ten lines
    and pushed the page down and back)."""
    with st.container(border=True):
        c_lam, c_t, c_eps, c_split, c_det = st.columns([1.9, 2.2, 1.9, 1.9, 3.1])  # the chips fit at 1280 px
        with c_lam:  # the slider first, level with T's and ε's; the checkbox (read from the session) under it
            st.slider(
                "λ (weight of the errors in D*)",
                0.0,
                1.0,
                step=LAM_STEP,
                key=session.EX_LAM,
                disabled=st.session_state[session.EX_LAM_AUTO],
            )
            lam_auto = st.checkbox(
                "λ auto",
                key=session.EX_LAM_AUTO,
                help="λ = N+ / (N+ + N−), the share of correct predictions in the tuning split (the paper's choice).",
            )
        with c_t:
            st.select_slider(
                "T (softmax temperature)",
                options=explore.TEMPERATURES,
                key=session.EX_TEMPERATURE,
                format_func=lambda t: f"{t:g}",
                help="Steps on a log scale. Applies to Rel-U and Doctor; MSP (T=1), ODIN (T=1000), Entropy and Energy "
                "(T=1) keep their standard settings. The paper's values 0.5, 1, 1.1, 1.2, 1.5, "
                "2, 5, 10, 100, 1000 are all steps.",
            )
        with c_eps:
            if not has_model:  # the slider shows the ε actually used
                st.session_state[session.EX_EPS] = 0.0
            st.select_slider(
                "ε (input pre-processing)",
                options=explore.EPSILONS,
                key=session.EX_EPS,
                format_func=lambda e: f"{e:g}",
                disabled=not has_model,
            )
            if not has_model:
                st.caption("ε needs the model and the images; this run has logits only.")
        with c_split:
            page.fraction_slider(st, "tuning split fraction", key=session.EX_TUNE_FRACTION)
            st.number_input("split seed", min_value=0, max_value=10_000, step=1, key=session.EX_SEED)
        with c_det:
            st.multiselect(
                "detectors", list(explore.DETECTOR_CHOICES), format_func=detectors.label, key=session.EX_DETECTORS
            )
            o1, o2 = st.columns(2)
            o1.radio("operating point", ["target TPR", "coverage"], key=session.EX_OP_KIND)
            o2.slider("target", 0.05, 1.0, step=0.01, key=session.EX_OP_TARGET)
        eps_slot = st.container()
    session.keep(session.explore_defaults(), session.EX_KEPT)
    state = st.session_state
    settings = Settings(
        lam="auto" if lam_auto else round(float(state[session.EX_LAM]), LAM_DECIMALS),  # the slider's step
        temperature=float(state[session.EX_TEMPERATURE]),
        eps=float(state[session.EX_EPS]) if has_model else 0.0,
        tune_fraction=float(state[session.EX_TUNE_FRACTION]),
        seed=int(state[session.EX_SEED]),
        keys=list(state[session.EX_DETECTORS]) or list(protocol.PAIRED),
        op_kind="tpr" if state[session.EX_OP_KIND] == "target TPR" else "coverage",
        op_target=float(state[session.EX_OP_TARGET]),
    )
    return settings, c_lam, eps_slot


#: Neighbours are sent only for runs whose views and bootstraps are cheap: the Rel-U score costs N × C²
#: multiply-adds (10k × 100: 10⁸, a few ms; 50k × 1000: 5·10¹⁰, seconds) and the paired bootstrap ~N·10³.
FOLLOW_MAX_WORK = 3e8
FOLLOW_MAX_SAMPLES = 50_000


@dataclass
class LamView:
    """What the panels that follow λ show for one view: its operating points, D*, ROC and risk-coverage figures,
    the metrics table, and the markup of the D* caption, the metrics table and the paired table (the operating
    table's is made by :func:`_operating_html` when its tab is open)."""

    view: explore.ExploreView
    points: dict[str, metrics.OperatingPoint]
    heat: object
    roc: object
    rc: object
    dstar_caption: str = ""
    table: pd.DataFrame | None = None
    metrics_html: str = ""
    paired_html: str = ""


def _lam_figures(view: explore.ExploreView, s: Settings, class_names: list[str], *, keep: bool = True) -> LamView:
    """The operating points and figures of ``view`` (its tables come later: :func:`_lam_tables`), kept for the
    session with ``keep`` (clean views, which :func:`_view` keeps too): a λ press makes the previous rerun's
    neighbour the current view, whose figures (and their JSON, ``live_chart``) are then reused."""
    store = st.session_state.setdefault(session.EX_LAM_VIEWS, LRURegistry(8))
    key = (id(view), s.op_kind, s.op_target)
    held = store.get(key) if keep else None
    if held is not None and held[0] is view:  # the same view object, not one that reused its id
        return held[1]
    correct_eval = view.correct[view.eval_idx]
    points = {
        k: metrics.operating_point(d.eval_uncertainty, correct_eval, s.op_kind, s.op_target)
        for k, d in view.detectors.items()
    }
    heat, roc, rc = explore.view_figures(view, class_names, {k: points[k] for k in s.keys}, s.keys)
    text = (
        f"Fitted on the tuning split ({view.tune_idx.size} samples) at T = {s.temperature:g}, "
        f"λ = {view.lam_used:.3g}; normalised to unit Frobenius norm."
    )
    if view.fallback:
        text += f" {protocol.FALLBACK_LABEL}: D* is empty at this λ, so Rel-U ranks exactly like Doctor."
    lv = LamView(view, points, heat, roc, rc, dstar_caption=f"<p>{html.escape(text)}</p>")
    if keep:
        store[key] = (view, lv)
    return lv


def _lam_tables(lv: LamView, s: Settings, paired_pending: bool) -> LamView:
    """Fills in ``lv``'s metrics table (the Rel-U − Doctor cells coloured where the paired interval excludes 0)
    and the markup of its tables; ``paired_pending``: the paired bootstrap is still running."""
    view = lv.view
    relu, doctor = (detectors.label(k) for k in protocol.PAIRED)
    lv.table = comparison.metrics_table(
        {view.detectors[k].name: view.detectors[k].summary for k in s.keys},
        view.accuracy_eval,
        difference=(relu, doctor),
    )
    classes = comparison.difference_classes(lv.table, view.paired, comparison.difference_label(relu, doctor))
    lv.metrics_html = report.table_html(lv.table, classes=classes)
    if view.paired:
        lv.paired_html = report.table_html(comparison.paired_rows(view.paired), index=False)
    elif paired_pending:
        lv.paired_html = "<p>computing the paired bootstrap interval of Rel-U − Doctor …</p>"
    return lv


@dataclass(frozen=True)
class Neighbours:
    """The views of λ's neighbours, keyed as the browser reads the slider (none: nothing follows λ), with what
    every element that follows λ sends beside them: the value its own view is for and the panel run's number."""

    views: dict[str, LamView]
    current: str
    run: int

    def follow(self, part: Callable[[LamView], object]) -> Follow | None:
        """``part`` of each neighbour, for an element that follows the λ slider (None when there are none)."""
        if not self.views:
            return None
        return Follow(
            session.EX_LAM, self.current, {k: part(lv) for k, lv in self.views.items()}, self.run, LAM_DECIMALS
        )


def _neighbours(run_, s: Settings, class_names: list[str]) -> Neighbours:
    """The figures of λ's neighbours (:data:`LAM_STEP`; their tables come with :func:`_neighbour_tables`); none
    when λ is automatic, under ε (the pass is per λ) or for a run too large (:data:`FOLLOW_MAX_WORK`,
    :data:`FOLLOW_MAX_SAMPLES`). A neighbour that cannot be computed is not sent. Counts the panel's runs."""
    state = st.session_state
    run = state[session.EX_FOLLOW_RUN] = state.get(session.EX_FOLLOW_RUN, 0) + 1
    n, c = len(run_.labels), len(run_.class_names)
    if s.lam == "auto" or s.eps > 0 or n * c * c > FOLLOW_MAX_WORK or n > FOLLOW_MAX_SAMPLES:
        return Neighbours({}, "", run)
    views = {}
    for lam in (round(s.lam - LAM_STEP, LAM_DECIMALS), round(s.lam + LAM_STEP, LAM_DECIMALS)):
        if 0.0 <= lam <= 1.0:
            try:
                view = _view(run_.run_id, s.temperature, lam, s.tune_fraction, s.seed, s.keys, None, None)
            except Exception:  # noqa: BLE001 - the move then waits for the server, which says what failed
                _LOG.exception("the view of λ = %s could not be computed", lam)
                continue
            views[value_key(lam, LAM_DECIMALS)] = _lam_figures(view, s, class_names)
    return Neighbours(views, value_key(s.lam, LAM_DECIMALS), run)


def _neighbour_tables(neighbours: Neighbours, s: Settings, start_bootstraps: bool) -> None:
    """Fills in the neighbours' tables. With ``start_bootstraps`` (once the view's own has landed, so that it
    never waits behind them) their missing paired bootstraps start in the background; a neighbour carries its
    intervals from the first rerun after they land (the panel polls for the view's own bootstrap only). Until
    then its table says "computing", as the server's would."""
    for lv in neighbours.views.values():
        view, failed = lv.view, False
        if not view.paired:
            job = (
                explore.paired_job(view, s.seed)
                if start_bootstraps
                else jobs.MANAGER.get(explore.paired_job_key(view, s.seed))
            )
            if job is not None and job.state == jobs.DONE:
                view.paired = job.result
            failed = job is not None and job.state in (jobs.FAILED, jobs.CANCELLED)  # the server will say
        _lam_tables(lv, s, paired_pending=not view.paired and not failed)


def _dstar_and_confusion(run_id: str, lv: LamView, neighbours: Neighbours, class_names: list[str], s: Settings):
    """D* (or Doctor's implicit matrix) beside the tuning split's confusion matrix, whose cell click picks the
    gallery's pair and opens its tab. Returns the two figures drawn."""
    left, right = st.columns(2)
    with left:
        doctor_matrix = st.toggle(
            "Show Doctor's implicit matrix instead (ones off the diagonal)", key=session.EX_SHOW_DOCTOR
        )
        heat = lv.heat
        if doctor_matrix:
            heat = figures.dstar_heatmap(
                detectors.hamming_matrix(len(class_names)),
                class_names,
                title="Doctor's implicit matrix (ones off the diagonal)",
            )
        _chart(heat, "dstar", follow=None if doctor_matrix else neighbours.follow(lambda n: n.heat))
        _html(lv.dstar_caption, "dstar_caption", neighbours.follow(lambda n: n.dstar_caption))
    with right:
        cm, cm_fig = explore.confusion_figure(run_id, s.tune_fraction, s.seed)
        clicked = _chart(cm_fig, "confusion", clickable=True)
        st.caption(
            "Rows: true class, columns: predicted class (tuning split). Grey: correct predictions. "
            "Click a cell to see its samples (tab below)."
        )
    state = st.session_state
    pick = state.setdefault(session.EX_GALLERY_PICK, session.gallery_defaults())
    if state.get(session.EX_PAIR_RUN) != run_id:  # a new run opens its gallery on its most frequent confusion
        state[session.EX_PAIR_RUN] = run_id
        pick[session.EX_PAIR_TRUE], pick[session.EX_PAIR_PRED] = (
            int(v) for v in np.unravel_index(np.argmax(np.where(np.eye(len(cm), dtype=bool), -1, cm)), cm.shape)
        )
    if clicked and clicked.get("customdata"):  # the cell's (true, predicted) pair
        pick[session.EX_PAIR_TRUE], pick[session.EX_PAIR_PRED] = (int(v) for v in clicked["customdata"][:2])
        state[session.EX_DETAIL_TAB] = DETAIL_TABS[1]
        state[session.EX_CELL_CLICKS] = state[session.EX_SCROLL_PENDING] = state.get(session.EX_CELL_CLICKS, 0) + 1
    return heat, cm_fig


def _picked(key: str) -> None:
    """A gallery widget's change, into the choices its widgets mirror."""
    st.session_state[session.EX_GALLERY_PICK][key] = st.session_state[key]


def _mirrored(key: str) -> dict:
    """The keywords of a gallery widget: its key, and its changes copied into the choices (:func:`_picked`)."""
    return {"key": key, "on_change": _picked, "args": (key,)}


def _curves(lv: LamView, neighbours: Neighbours) -> None:
    c_roc, c_rc = st.columns(2)
    with c_roc:
        _chart(lv.roc, "roc", follow=neighbours.follow(lambda n: n.roc))
    with c_rc:
        _chart(lv.rc, "risk_coverage", follow=neighbours.follow(lambda n: n.rc))


def _settle_paired(view: explore.ExploreView, paired_job) -> bool:
    """Waits briefly for the paired bootstrap and keeps its result with the view (for the widgets that do not
    change it); a failure is shown once and a cancelled job is forgotten, so asking again retries. Returns
    whether it is still running."""
    if paired_job is not None and paired_job.wait(PAIRED_WAIT_S):
        if paired_job.state == jobs.DONE:
            view.paired = paired_job.result
        else:
            if paired_job.state == jobs.FAILED:
                jobbox.show_error(InputError(paired_job.error), "the paired bootstrap")
            jobs.MANAGER.forget(paired_job.key)
    return paired_job is not None and paired_job.running


def _metrics_section(lv: LamView, neighbours: Neighbours, s: Settings, eps_note: str, perturbed) -> None:
    """The metrics table with the significant Rel-U − Doctor differences coloured."""
    relu, doctor = (detectors.label(k) for k in protocol.PAIRED)
    st.subheader("Metrics on the evaluation split")
    _html(lv.metrics_html, "metrics", neighbours.follow(lambda n: n.metrics_html))
    st.caption(
        f"{protocol.FPR_CONVENTION}. Accuracy is the classifier's, shared by every detector. "
        f"{relu} − {doctor}: green where {relu} is significantly better, red where {doctor} is (FPR95, AUROC and "
        "AURC, whose paired interval below excludes 0), plain otherwise. "
        f"Evaluation split: {lv.view.eval_idx.size} samples; "
        + (
            f"{eps_note} (Rel-U and Doctor pre-processed)."
            if perturbed is not None
            else f"ε = {s.eps:g}."
            if s.eps == 0
            else f"{eps_note}."
        )
    )


def _paired_section(lv: LamView, neighbours: Neighbours, paired_job) -> None:
    """Rel-U − Doctor with its paired intervals ("computing …" while the bootstrap runs: the browser asks for
    the panel again every :data:`PAIRED_POLL_S` until it has landed)."""
    view = lv.view
    st.markdown("**Is Rel-U better than Doctor here?** Paired differences on this evaluation split:")
    polling = paired_job is not None and paired_job.running
    _html(lv.paired_html, "paired", neighbours.follow(lambda n: n.paired_html), PAIRED_POLL_S if polling else None)
    if view.paired:
        first = next(iter(view.paired.values()))
        st.caption(
            f"{100 * first.confidence:g} % percentile interval over {first.n_resamples} paired "
            "bootstrap resamples of the evaluation samples (the same resample scores both detectors)."
        )


#: What the operating-point table shows (``what``: the target, e.g. "TPR ≥ 95%").
OPERATING_NOTE = (
    "Each detector's threshold is the lowest reaching {what} on the evaluation split; it accepts the predictions "
    "with uncertainty ≤ threshold. Errors caught = misclassified and rejected."
)


def _operating_table(lv: LamView, s: Settings) -> pd.DataFrame:
    """The operating point of each detector shown (made by the open tab or an export only, not on every move)."""
    view = lv.view
    return comparison.operating_table(
        {view.detectors[k].name: lv.points[k] for k in s.keys}, view.correct[view.eval_idx]
    )


def _operating_html(lv: LamView, s: Settings) -> str:
    table = _operating_table(lv, s)
    return report.table_html(table, formats={"threshold": comparison.threshold_format(table["threshold"])})


def _operating_section(lv: LamView, neighbours: Neighbours, s: Settings) -> None:
    _html(_operating_html(lv, s), "operating", neighbours.follow(lambda n: _operating_html(n, s)))
    st.caption(OPERATING_NOTE.format(what=_target_words(s)) + " Marked with × on both curves.")


def _target_words(s: Settings) -> str:
    return f"TPR ≥ {s.op_target:.0%}" if s.op_kind == "tpr" else f"coverage ≥ {s.op_target:.0%}"


def _cell_gallery(run_, view: explore.ExploreView, keys: list[str], class_names: list[str]) -> None:
    """The samples of the confusion cell picked (by a click on the matrix or here)."""
    pick = st.session_state[session.EX_GALLERY_PICK]
    st.session_state.update(pick)  # the widgets show the choices (a click may have changed them)
    click = st.session_state.pop(session.EX_SCROLL_PENDING, None)
    if click is not None:  # the click opened this tab: bring its samples into view
        page.scroll_here(str(click), key=session.EX_SCROLL_GALLERY)
    g1, g2, g3 = st.columns([2, 2, 3])
    true_class, pred_class = [
        place.selectbox(label, range(len(class_names)), format_func=class_names.__getitem__, **_mirrored(key))
        for place, label, key in (
            (g1, "true class", session.EX_PAIR_TRUE),
            (g2, "predicted class", session.EX_PAIR_PRED),
        )
    ]
    split_name = g3.radio("from", session.GALLERY_SPLITS, horizontal=True, **_mirrored(session.EX_GALLERY_SPLIT))
    tuning = split_name == session.GALLERY_SPLITS[0]
    pool = view.tune_idx if tuning else view.eval_idx
    cell = pool[(run_.labels[pool] == true_class) & (view.predictions[pool] == pred_class)]
    st.caption(
        f"{page.count(cell.size, 'sample')} with true class {class_names[true_class]} predicted as "
        f"{class_names[pred_class]} in the {'tuning' if tuning else 'evaluation'} split; clean uncertainty scores "
        "(higher = more likely wrong)."
    )
    _gallery(cell, view, keys, class_names, name_classes=False)


def _caught_by_one(view: explore.ExploreView, points: dict, class_names: list[str], subset) -> None:
    """The errors Rel-U catches that Doctor misses at the operating point, and the reverse, among the samples
    the metrics are computed on (``subset``: the ε pass's subsample of the evaluation split, else None)."""
    only_relu, only_doctor = comparison.caught_by_one(
        view.eval_idx, view.correct[view.eval_idx], points["relu"].accepted, points["doctor"].accepted
    )
    where = "the evaluation split" if subset is None else f"the ε pass's subsample ({subset.size:,} images)"
    st.caption(
        f"Errors of {where} that one detector rejects at its operating point (set above) and the other accepts. "
        "Captions: sample, true → predicted class, clean uncertainty scores."
    )
    a, b = st.columns(2)
    with a:
        st.markdown(f"**Caught by Rel-U, missed by Doctor: {only_relu.size}**")
        _gallery(only_relu, view, ["relu", "doctor"], class_names, limit=12, columns=4)
    with b:
        st.markdown(f"**Caught by Doctor, missed by Rel-U: {only_doctor.size}**")
        _gallery(only_doctor, view, ["relu", "doctor"], class_names, limit=12, columns=4)


def _report_settings(view: explore.ExploreView, s: Settings, eps_note: str) -> dict:
    """Every setting of the view, in words, for the HTML report."""
    return {
        "T (Rel-U, Doctor)": f"{s.temperature:g}",
        "λ": s.lam if isinstance(s.lam, str) else f"{s.lam:g}",
        "λ used": f"{view.lam_used:.4g}",
        "D*": protocol.FALLBACK_LABEL if view.fallback else "learned on the tuning split",
        "ε (input pre-processing)": eps_note or f"{s.eps:g}",
        "tuning split fraction": f"{s.tune_fraction:g}",
        "split seed": s.seed,
        "tuning / evaluated samples": f"{view.tune_idx.size:,} / {view.eval_idx.size:,}",
        "detectors": ", ".join(view.detectors[k].name for k in s.keys),
        "operating point": _target_words(s),
        "selection": "fixed settings (no search)",
    }


def _eps_section(run_id: str, s: Settings, slot):
    """``(perturbed, subset, note)`` of the ε pass (nothing at ε = 0); its note and progress go in ``slot``,
    the bar staying (full) once the whole split is done, so that the page does not move when it ends."""
    if s.eps <= 0:
        return None, None, ""
    eps_pass = _eps_inputs(run_id, s.temperature, s.lam, s.tune_fraction, s.seed, s.eps)
    with slot:
        st.caption(eps_pass.note)
        if eps_pass.failed:
            left, right = st.columns([5, 1], vertical_alignment="center")
            left.error(eps_pass.failed)
            right.button(
                "Retry the ε pass",
                key=session.EX_EPS_RETRY,
                on_click=st.session_state.pop,
                args=(session.EX_EPS_FAILED, None),
            )
        elif eps_pass.job is not None:
            _eps_watch(eps_pass.job.key, eps_pass.step)
        elif eps_pass.done:
            st.progress(1.0, text="ε pass done")
    return eps_pass.perturbed, eps_pass.subset, eps_pass.note


@st.fragment
def explore_panel(run_id: str) -> None:
    run_ = explore.get_run(run_id)
    class_names = list(run_.class_names)
    s, c_lam, eps_slot = _controls(has_model=run_.model is not None and run_.images is not None)
    query.write_query_params(s.lam, s.temperature, s.eps, s.tune_fraction, s.seed, run_)

    perturbed, subset, eps_note = _eps_section(run_id, s, eps_slot)
    try:
        view = _view(run_id, s.temperature, s.lam, s.tune_fraction, s.seed, s.keys, perturbed, subset)
    except Exception as exc:  # noqa: BLE001 - one line for the user; show_error logs anything unexpected
        jobbox.show_error(exc, "Explore")
        return
    if s.lam == "auto":  # the slider, disabled, still shows the last manual value
        c_lam.caption(f"auto: λ = {view.lam_used:.3g}")
    # The paired bootstrap (~100-200 ms at 10k) runs beside the figures in a background job; the tables below
    # wait for it briefly, else show it when it lands (_paired_section).
    paired_job = None if view.paired else explore.paired_job(view, s.seed)
    lv = _lam_figures(view, s, class_names, keep=perturbed is None)
    neighbours = _neighbours(run_, s, class_names)
    heat, cm_fig = _dstar_and_confusion(run_id, lv, neighbours, class_names, s)
    _curves(lv, neighbours)
    pending = _settle_paired(view, paired_job)
    _lam_tables(lv, s, pending)
    # the neighbours' bootstraps start once the view's own has landed, so that it never waits behind them
    _neighbour_tables(neighbours, s, start_bootstraps=not pending)
    _metrics_section(lv, neighbours, s, eps_note, perturbed)
    figs = {"dstar": heat, "confusion": cm_fig, "roc": lv.roc, "risk_coverage": lv.rc}
    _export_buttons(run_, view, figs, lv.table, lambda: _operating_table(lv, s), _report_settings(view, s, eps_note))
    _paired_section(lv, neighbours, paired_job)
    operating, cell, caught = st.tabs(DETAIL_TABS, key=session.EX_DETAIL_TAB, on_change="rerun")
    if operating.open:
        with operating:
            _operating_section(lv, neighbours, s)
    if cell.open:
        with cell:
            _cell_gallery(run_, view, s.keys, class_names)
    if caught.open:
        with caught:
            _caught_by_one(view, lv.points, class_names, subset)


try:
    explore_panel(run.run_id)
except Cancelled:
    st.warning("Cancelled.")
