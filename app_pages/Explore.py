"""Explore: Rel-U against Doctor (and the baselines) on the current run, live as λ, T, ε and the split move."""

from __future__ import annotations

from html import escape as html_escape

import numpy as np
import streamlit as st

from relu_core import detector_comparison, detectors, explore, figures, onnx_model, protocol
from relu_core.errors import Cancelled, InputError
from relu_core.progress import count
from relu_core.runs import get_run
from studio import explore_export, explore_gallery, explore_ui, frame, jobbox, page, query, runs, session
from studio.explore_ui import Neighbours, chart, html
from studio.text import plain

run = frame.current_run()
query.init_from_query_params()
query.take_guarantee_param()  # the Start scorecard's guaranteed-risk row opens Explore at its r* and δ

# a subheader, not a title: with the one-row control bar, D* and the confusion matrix fit in 1280 x 720
st.subheader("Explore: Rel-U vs Doctor", help=page.manual_help("reference/dashboard.md"))
st.caption(plain(f"Run: {runs.run_label(run)}"))
query.query_params_notice()

session.share(session.explore_shared(run.model is not None and run.images is not None))  # every page's T, λ, ...
session.restore(session.explore_defaults(), session.EX_KEPT)  # the controls survive a visit to another page


#: The detail tabs under the metrics. Only the open one is computed and drawn: every element of the panel is
#: redrawn on each slider move, and the galleries and the operating table were about a third of them.
DETAIL_TABS = ("Operating point", "Samples of a confusion cell", "Errors only one detector catches")


def _dstar_and_confusion(run_, view: explore.View, neighbours: Neighbours, s: explore.Setting) -> None:
    """D* (or Doctor's implicit matrix) beside the tuning split's confusion matrix, whose cell click picks the
    gallery's pair and opens its tab."""
    left, right = st.columns(2)
    with left:
        chart_slot = st.container()  # the toggle under the chart: the charts' tops level, in the first viewport
        doctor_matrix = st.toggle(
            "Show Doctor's implicit matrix instead (ones off the diagonal)", key=session.EX_SHOW_DOCTOR
        )
        heat = view.heat
        if doctor_matrix:
            heat = figures.dstar_heatmap(
                detectors.hamming_matrix(len(view.class_names)),
                view.class_names,
                title="Doctor's implicit matrix (ones off the diagonal)",
            )
        chart(chart_slot, heat, "dstar", follow=None if doctor_matrix else neighbours.follow(lambda v: v.heat))
        html(view.dstar_caption, "dstar_caption", neighbours.follow(lambda v: v.dstar_caption))
    with right:
        cm, cm_fig = explore.confusion_figure(run_, s.tune_fraction, s.seed)
        clicked = chart(st, cm_fig, "confusion", clickable=True)
        st.caption(
            "Rows: true class, columns: predicted class (tuning split). Grey: correct predictions. "
            "Click a cell to see its samples (tab below)."
        )
    state = st.session_state
    pick = state.setdefault(session.EX_GALLERY_PICK, session.gallery_defaults())
    if state.get(session.EX_PAIR_RUN) != run_.run_id:  # a new run opens its gallery on its most frequent confusion
        state[session.EX_PAIR_RUN] = run_.run_id
        pick[session.EX_PAIR_TRUE], pick[session.EX_PAIR_PRED] = (
            int(v) for v in np.unravel_index(np.argmax(np.where(np.eye(len(cm), dtype=bool), -1, cm)), cm.shape)
        )
    if clicked and clicked.get("customdata"):  # the cell's (true, predicted) pair
        pick[session.EX_PAIR_TRUE], pick[session.EX_PAIR_PRED] = (int(v) for v in clicked["customdata"][:2])
        state[session.EX_DETAIL_TAB] = DETAIL_TABS[1]
        state[session.EX_CELL_CLICKS] = state[session.EX_SCROLL_PENDING] = state.get(session.EX_CELL_CLICKS, 0) + 1


def _picked(key: str) -> None:
    """A gallery widget's change, into the choices its widgets mirror."""
    st.session_state[session.EX_GALLERY_PICK][key] = st.session_state[key]


def _mirrored(key: str) -> dict:
    """The keywords of a gallery widget: its key, and its changes copied into the choices (:func:`_picked`)."""
    return {"key": key, "on_change": _picked, "args": (key,)}


def _curves(view: explore.View, neighbours: Neighbours, s: explore.Setting) -> None:
    c_roc, c_rc = st.columns(2)
    with c_roc:
        chart(st, view.marked(s).roc, "roc", follow=neighbours.follow(lambda v: v.marked(s).roc))
    with c_rc:
        slot = st.container()  # the chart above its toggle, level with the ROC
        generalized = st.toggle(  # a short label: the long one was cut at half of 1280 pixels
            "Generalised risk (AUGRC)",
            key=session.EX_GENERALIZED_RISK,
            help="Risk as the share of all samples that are accepted and wrong (AUGRC, its area), instead of the "
            "share of errors among the accepted ones.",
        )
        shown = (lambda v: v.marked(s).generalized_rc) if generalized else (lambda v: v.marked(s).rc)
        with slot:
            chart(st, shown(view), "risk_coverage", follow=neighbours.follow(shown))
    if s.guaranteed:  # the answer in words, under the charts that mark it
        html(_guarantee_words(view, s), "guarantee_words", neighbours.follow(lambda v: _guarantee_words(v, s)))


def _guarantee_words(view: explore.View, s: explore.Setting) -> str:
    """The guarantee in plain words, as an HTML paragraph (it follows λ)."""
    certified = view.marked(s).guarantee
    return (
        f"<p><b>{html_escape(certified.sentence())}</b> × on both charts: each detector's certified threshold, read "
        "on the evaluation half; dotted: r*. Details under Operating point.</p>"
    )


def _metrics_section(view: explore.View, neighbours: Neighbours, s: explore.Setting, eps_note: str) -> None:
    """The metrics table with the significant Rel-U − Doctor differences coloured."""
    relu, doctor = (detectors.label(k) for k in protocol.PAIRED)
    st.subheader("Metrics on the evaluation split")
    html(explore.metrics_html(view), "metrics", neighbours.follow(explore.metrics_html))
    st.caption(
        f"{protocol.FPR_CONVENTION}. Accuracy is the classifier's, shared by every detector. "
        f"{relu} − {doctor}: green where {relu} is significantly better, red where {doctor} is (FPR95, AUROC, "
        "AURC and AUGRC, whose paired interval below excludes 0), plain otherwise. "
        f"Evaluation split: {view.eval_idx.size} samples; "
        + (
            f"{eps_note} (Rel-U and Doctor pre-processed)."
            if view.perturbed is not None
            else f"ε = {s.eps:g}."
            if s.eps == 0
            else f"{eps_note}."
        )
    )


def _paired_section(view: explore.View, neighbours: Neighbours, pending: bool) -> None:
    """Rel-U − Doctor with its paired intervals ("computing …" while the bootstrap runs: the browser asks for
    the panel again every ``PAIRED_POLL_S`` until it has landed)."""
    st.markdown("**Is Rel-U better than Doctor here?** Paired differences on this evaluation split:")
    poll_s = explore_ui.PAIRED_POLL_S if pending else None
    html(explore.paired_html(view, pending), "paired", neighbours.follow_paired(), poll_s)
    if view.paired:
        st.caption(explore.paired_note(view))
        # both FPR95 questions, in words; it follows λ (a neighbour's says nothing until its bootstrap landed)
        html(explore.operating_points_html(view), "operating_points", neighbours.follow(explore.operating_points_html))


def _operating_section(view: explore.View, neighbours: Neighbours, s: explore.Setting) -> None:
    if s.guaranteed:
        _guarantee_section(view, s)
        return
    html(explore.operating_html(view, s), "operating", neighbours.follow(lambda v: explore.operating_html(v, s)))
    st.caption(explore.operating_note(view, s) + " Marked with × on both curves.")


def _guarantee_section(view: explore.View, s: explore.Setting) -> None:
    """The detectors at a guaranteed risk: certificate and realised rates, Rel-U − Doctor in coverage (its
    bootstrap in a background job: the table says "computing" until it lands, the panel polling), the counts."""
    certified = view.marked(s).guarantee
    job = None if certified.paired is not None else explore.guarantee_paired_job(certified)
    pending, error = explore.guarantee_settle_paired(certified, job, explore.views.PAIRED_WAIT_S)
    if error:
        jobbox.show_error(InputError(error), "the coverage bootstrap")
    st.markdown(f"**{plain(certified.sentence())}**")
    html(explore.guarantee_html(view, s, pending), "guarantee", None, explore_ui.PAIRED_POLL_S if pending else None)
    st.caption(certified.realised_note(view.setting.detectors))  # the sentence says r*, the table may show more
    html(explore.operating_html(view, s), "operating", None)
    refused = any(not result.certificate.certified for result in certified.results.values())
    st.caption(
        f"{certified.note()} The counts: the evaluation half at the certified thresholds; errors caught = "
        "misclassified and rejected."
        + (" Not certified: no threshold could be (the reason in the first column)." if refused else "")
    )


def _cell_gallery(run_, view: explore.View) -> None:
    """The samples of the confusion cell picked (by a click on the matrix or here)."""
    class_names = view.class_names
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
        plain(
            f"{count(cell.size, 'sample')} with true class {class_names[true_class]} predicted as "
            f"{class_names[pred_class]} in the {'tuning' if tuning else 'evaluation'} split; clean uncertainty "
            "scores (higher = more likely wrong)."
        )
    )
    explore_gallery.gallery(run_, cell, view, view.setting.detectors, name="cell", name_classes=False)


def _caught_by_one(run_, view: explore.View, s: explore.Setting) -> None:
    """The errors Rel-U catches that Doctor misses at the operating point, and the reverse, among the samples
    the metrics are computed on (the ε pass's subsample of the evaluation split when it has one)."""
    marked = view.marked(s)
    points = marked.points
    only_relu, only_doctor = detector_comparison.caught_by_one(
        marked.eval_idx, marked.correct_eval, points["relu"].accepted, points["doctor"].accepted
    )
    subset = view.perturbed.subset if view.perturbed is not None else None
    where = "the evaluation split" if subset is None else f"the ε pass's subsample ({subset.size:,} images)"
    if s.guaranteed:
        where = f"the evaluation half of {where} (the other half certified the thresholds)"
    st.caption(
        f"Errors of {where} that one detector rejects at its operating point (set above) and the other accepts. "
        "Captions: sample, true → predicted class, clean uncertainty scores."
    )
    for column, (title, caught) in zip(
        st.columns(2),
        (("Caught by Rel-U, missed by Doctor", only_relu), ("Caught by Doctor, missed by Rel-U", only_doctor)),
    ):
        with column:
            st.markdown(f"**{title}: {caught.size}**")
            explore_gallery.gallery(run_, caught, view, protocol.PAIRED, name=title, page_size=12, columns=4)


@st.fragment
def explore_panel(run_id: str) -> None:
    run_ = get_run(run_id)
    has_model = run_.model is not None and run_.images is not None
    if run_.onnx_file:  # said on the page, not only in the ε slider's help: ONNX users come looking for ε
        s, c_lam, eps_slot = explore_ui.controls(has_model, no_eps=f"{onnx_model.NO_EPS}.")
        eps_slot.caption(f"{onnx_model.NO_EPS}.")
    else:
        s, c_lam, eps_slot = explore_ui.controls(has_model)
    query.write_query_params(s, run_)
    shown = explore_ui.eps_section(run_, s, eps_slot)
    try:
        view = explore.view(run_, shown.setting, shown.perturbed)
    except Exception as exc:  # noqa: BLE001 - one line for the user; show_error logs anything unexpected
        jobbox.show_error(exc, "Explore")
        return
    if s.lam == "auto":  # the slider, disabled, still shows the last manual value
        c_lam.caption(f"auto: λ = {view.lam_used:.3g}")
    # The paired bootstrap (D* refitted in each resample: about a second at 10k) runs beside the figures in a
    # background job; the tables below wait for it briefly, else show it when it lands (_paired_section). A λ the
    # slider passed over has its bootstrap cancelled. λ's neighbours come first, before the bootstrap takes a
    # core: on a busy machine they decide whether the next press is drawn at once.
    neighbours = explore_ui.neighbours(run_, s)
    explore_ui.cancel_superseded_paired(st.session_state, view, neighbours)
    paired_job = None if view.paired else explore.paired_job(view)
    _dstar_and_confusion(run_, view, neighbours, s)
    _curves(view, neighbours, s)
    pending, error = explore.settle_paired(view, paired_job)
    if error:
        jobbox.show_error(InputError(error), "the paired bootstrap")
    neighbours.settle_paired(start=not pending)  # the view's own bootstrap first, theirs behind it
    _metrics_section(view, neighbours, s, shown.note)
    explore_export.export_buttons(run_, view, s, shown.note)
    _paired_section(view, neighbours, pending)
    tabs = st.tabs(DETAIL_TABS, key=session.EX_DETAIL_TAB, on_change="rerun")
    sections = (
        lambda: _operating_section(view, neighbours, s),
        lambda: _cell_gallery(run_, view),
        lambda: _caught_by_one(run_, view, s),
    )
    for title, tab, section in zip(DETAIL_TABS, tabs, sections, strict=True):
        if tab.open:
            with tab:
                try:  # the galleries score every sample with Rel-U when first opened (on a GPU: memory)
                    section()
                except Exception as exc:  # noqa: BLE001 - one line for the user; the panel above stays
                    jobbox.show_error(exc, title)


try:
    explore_panel(run.run_id)
except Cancelled:
    st.warning("Cancelled.")
