"""Rel-U Studio, start page ("Start" in the navigation): the current run at a glance. First, in plain words, what
Rel-U and Doctor do and what "better" means, with an example from the run's own images; then the scorecard, Rel-U
against Doctor in each of the paper's settings the run supports (``relu_core.scorecard``, computed in background
jobs, each row linking to its page); then D* beside its confusion matrix and the verdict on that one split.

Part of ``streamlit run app.py``; with no choice made the default run (Fashion-MNIST when it is on the
machine, else digits, with a small CNN trained here on first use, then cached) is prepared in the background.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from relu_core import detector_comparison, explore, figures, metric_info, metrics, risk_control, scorecard
from relu_core.errors import InputError
from relu_core.progress import count
from relu_core.runs import get_run
from studio import frame, jobbox, page, session
from studio.live_chart import live_html
from studio.text import plain, with_article

START_HEIGHT = 400  # pixels per matrix figure
# class labels per axis and their length: the matrices are about 150 px across at 100 classes
START_TICKS, START_TICK_CHARS = 10, 10
NO_MODEBAR = {"displayModeBar": False}
#: How often the verdict's line asks for its fragment again while the paired bootstrap runs.
PAIRED_POLL_S = 0.5
PLAIN_WORDS = (
    "A classifier is sometimes wrong; a **detector** reads its predicted probabilities and **flags** the "
    "predictions it should not be trusted on. **Doctor** flags a prediction whose probability is spread over "
    "many classes. **Rel-U** first learns, from examples of this model's own mistakes, which classes it confuses "
    "with which, and flags probability spread over those. **Better** here means: of the model's wrong "
    "predictions, flags more, while flagging fewer of its right ones."
)

run = frame.current_run()
shared = session.shared()

# the plain words and the whole scorecard in the first viewport at 1280 x 720: less of Streamlit's top padding
# and half the gap between the scorecard's rows: their verdicts' lengths depend on the run (a "Mixed: …" verdict, a
# finished corruption study's counts take two lines each), and all five rows must still fit
st.html(
    '<style>[data-testid="stMainBlockContainer"] { padding-top: 0.5rem; }'
    f" .st-key-{session.START_SCORECARD} [data-testid='stVerticalBlock'] {{ gap: 0.5rem; }}</style>"
)
st.markdown(
    "### Rel-U Studio: when should a prediction not be trusted?", help=page.manual_help("reference/dashboard.md")
)
# Start shows clean scores (ε = 0) at the shared T, λ and tuning fraction, on the split Explore opens on
setting = explore.Setting(temperature=shared.temperature, lam=shared.lam, tune_fraction=shared.tune_fraction)
try:
    view = explore.view(run, setting)
except InputError as exc:  # a run that cannot be evaluated (uploads are checked, but a cached run may not be)
    jobbox.show_error(exc)
    st.caption("Pick or load another run in the sidebar.")
    st.stop()


def _examples() -> None:
    """One error each detector flags and the other accepts (at 95 % of the right predictions accepted), from
    this run's evaluation split: the same two pictures whoever catches more."""
    points = view.marked(setting).points
    only_relu, only_doctor = detector_comparison.caught_by_one(
        view.eval_idx, view.correct_eval, points["relu"].accepted, points["doctor"].accepted
    )
    names = view.class_names
    shown = (
        (only_relu, "Rel-U flags it, Doctor accepts it", "Rel-U flags and Doctor accepts"),
        (only_doctor, "Doctor flags it, Rel-U accepts it", "Doctor flags and Rel-U accepts"),
    )
    for caught, flagged, none_words in shown:
        if caught.size == 0:
            st.caption(f"No error here that {none_words}.")
            continue
        i = int(caught[0])
        true_class = with_article(names[run.labels[i]])  # "an airplane", "a cat"
        image, words_ = st.columns([1, 3.2], vertical_alignment="center")
        image.image(explore.thumbnail(run.images[i], size=72), width=72)
        words_.caption(
            f"{true_class[0].upper()}{true_class[1:]} the model took for {with_article(names[view.predictions[i]])}: "
            f"{flagged} ({count(caught.size, 'such error')})."
        )


words, picture = st.columns([3.4, 1.6], vertical_alignment="top")
words.markdown(PLAIN_WORDS)
with picture:
    if run.images is not None:
        _examples()
    else:
        st.caption("This run has logits only: no images to show.")


@st.fragment(run_every=1.0)
def _scorecard(run_id: str, shared_: scorecard.Shared) -> None:
    """The scorecard's rows, redrawn every second (its jobs run in the background: a row computing shows its
    progress, then its verdict), one line each with the numbers under it; the details in its tooltip."""
    pages = st.session_state[session.PAGES]
    with st.container(border=True, key=session.START_SCORECARD):
        for row in scorecard.rows(get_run(run_id), shared_):
            title, verdict, link = st.columns([2.1, 5.3, 2.3], vertical_alignment="center")
            title.markdown(f"**{row.title}**")
            verdict.markdown(row.verdict)
            if row.state == scorecard.COMPUTING:
                verdict.progress(row.fraction)
            if row.intervals or row.details:  # a row without an interval (nothing certified) still says why
                verdict.caption(row.intervals or "why: see ⓘ", help="  \n".join([*row.details, row.note]))
            # the mismatch row opens Studies on that study, at the settings this row's result was computed with;
            # the guaranteed-risk row opens Explore at its r* and δ
            asked = {"study": "mismatch"} if row.key == "mismatch" else None
            if row.key == "guaranteed_risk":
                risk = scorecard.guarantee_risk(get_run(run_id), shared_)
                asked = {"guarantee": f"{risk:g},{risk_control.DEFAULT_DELTA:g}"}
            link.page_link(pages[row.page], label=f"Open {pages[row.page].title}", query_params=asked)
        sentence = scorecard.paper_sentence(get_run(run_id), shared_)  # its job started with the card's
        if sentence:
            st.caption(sentence)


st.markdown(f"**Rel-U vs Doctor on this run, in each setting** (shared settings: {shared.words()})")
scorecard.start(run, shared)
_scorecard(run.run_id, shared)
st.caption(
    f"Numbers: Rel-U − Doctor ({metric_info.FPR95.label}: {metric_info.FPR95.better}; {metric_info.AUROC.label}: "
    f"{metric_info.AUROC.better}; coverage at a guaranteed risk, the share of predictions you may act on: the "
    "more, the better) [its 95 % paired bootstrap interval, "
    'pooled over the split seeds: "no clear difference" when it covers 0], or on how many items each detector is '
    "significantly better; the help icon beside them says how they were computed. The rows come in the same "
    "order and words whoever wins."
)

left, right, side = st.columns([5, 5, 2.4])
cm, cm_fig = explore.confusion_figure(run, setting.tune_fraction, setting.seed)
# compact copies (the confusion figure is cached and shared): both matrices and the run's numbers in one row
compact = {"height": START_HEIGHT, "margin": {"t": 40, "b": 10, "l": 10, "r": 10}}
with left:
    small_dstar = figures.copy_figure(view.heat).update_layout(**compact).update_traces(colorbar_thickness=12)
    small_dstar.update_layout(**figures.matrix_ticks(small_dstar, START_TICKS, START_TICK_CHARS))
    page.chart(st, small_dstar, "dstar", key=session.START_DSTAR, config=NO_MODEBAR)
with right:
    # no colour bar: the counts are written in the cells, and the matrix gets its width (about 110 px wide with it)
    small_cm = (
        figures.copy_figure(cm_fig)
        .update_layout(**compact)
        .update_traces(showscale=False, selector={"type": "heatmap"})
    )
    small_cm.update_layout(**figures.matrix_ticks(small_cm, START_TICKS, START_TICK_CHARS))
    page.chart(st, small_cm, "confusion", key=session.START_CONFUSION, config=NO_MODEBAR)
with side:
    n, c = run.logits.shape
    errors = int((np.argmax(run.logits, 1) != run.labels).sum())
    st.metric("accuracy", f"{metrics.accuracy(run.logits, run.labels):.2%}")
    # short values: the side column is ~175 px wide at 1280 x 720, and a metric's value does not wrap
    st.metric(f"errors of {n:,}", f"{errors:,}")
    st.metric("errors, evaluation split", f"{int((~view.correct_eval).sum()):,}")
    if st.button("Explore this run", type="primary", key=session.START_EXPLORE):
        frame.switch_to(frame.EXPLORE)


@st.fragment
def _verdict(run_id: str, setting_: explore.Setting, shared_: scorecard.Shared) -> None:
    """The one split's verdict, with its paired interval. The bootstrap (D* refitted in each resample: seconds on a
    busy machine) runs as a background job: waiting for it here kept the page of the previous run greyed out for
    seconds after a new run became current. Until it lands a line says so and polls this fragment."""
    view_ = explore.view(get_run(run_id), setting_)
    pending, error = explore.settle_paired(view_, None if view_.paired else explore.paired_job(view_))
    if error:
        jobbox.show_error(InputError(error), "the paired bootstrap")
    elif pending:
        live_html(
            st,
            "<p>Computing Rel-U − Doctor's paired interval on this split …</p>",
            key=session.START_VERDICT,
            poll_s=PAIRED_POLL_S,
        )
    else:
        st.info(
            f"{explore.start_verdict(view_)} That is one split, the matrices' above and the one Explore opens on; "
            f"the scorecard's first row averages {count(shared_.seeds, 'split seed')}."
            + (f" Clean scores (ε = 0) here; Explore shows the shared ε = {shared_.eps:g}." if shared_.eps else "")
        )


_verdict(run.run_id, setting, shared)

st.caption(
    f"Run: {plain(run.source or 'uploaded logits')} · {n:,} samples × {c} classes · run id `{run.run_id}`. "
    "D* (left) is Rel-U's learned matrix: entry (i, j) is large when the model's errors spread probability over "
    "classes i and j together; the confusion matrix (right, counts; grey: correct predictions) shows which classes "
    "the model actually confuses. "
    f"Both come from the tuning split ({setting.tune_fraction:.0%} of the samples, seed {setting.seed}); the verdict "
    "under them is measured on the rest. The shared settings were fixed in advance, not tuned: Explore moves "
    "them live (for every page), Studies sweeps them and Corruptions selects T and λ on a clean tuning split, as "
    "the paper does."
)
with st.expander("About Rel-U Studio and other runs"):
    st.markdown(
        "Misclassification detection with **Rel-U** (Dadalto et al., ICLR 2024), a data-driven relative "
        "uncertainty `pᵀ D* p` whose matrix D* is learned from the soft predictions of correct and wrong "
        "samples, compared live with **Doctor** (the Gini impurity, i.e. D = all ones off the diagonal) "
        "and the usual baselines (MSP, ODIN, Entropy, Energy).\n\n"
        "Use the sidebar: **Data set + model** computes the logits of a registered data set found on this "
        "machine (CIFAR-10 with the pretrained CIFAR ResNets when their weights are present; Fashion-MNIST, "
        "MNIST and digits with a small CNN trained here on demand), or downloads a torchvision set when online. "
        "**Upload logits** loads precomputed logits (npz with `logits` and `labels`, or csv / parquet with one "
        "column per class and a `label` column). **Upload model + data set** runs your checkpoint (TorchScript "
        "or a state dict for a listed architecture) on an image-folder zip, an npz, or a registered set. "
        "Long work runs as a background job (sidebar): it goes on when you change page. Logits are cached by "
        "content, so a run computed once loads instantly afterwards."
    )
