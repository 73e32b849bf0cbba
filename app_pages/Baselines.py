"""Baselines: Rel-U and Doctor beside an MLP, MC-Dropout, Deep Ensembles and conformal prediction sets.

A thin page: the widgets, one call to ``relu_core.baselines.baselines_study`` through the shared job box
(progress, device, Cancel) and the figures of ``relu_core.baselines.study_figures``. Results are kept per
(run, settings) in the session; the model passes of MC-Dropout and the ensemble members' logits are cached on
disk, so a rerun only refits and rescores.
"""

from __future__ import annotations

import streamlit as st

from relu_core import baselines, csv_text, detector_comparison, detectors, figures, metric_info, protocol
from relu_core.progress import count
from studio import jobbox, page, session
from studio.text import plain

run = page.page_header(
    "More baselines",
    "The paper's comparison with other families of detectors (its Bayesian-baselines and "
    "conformal-prediction tables, tab:bayes and tab:main_misclassification_detection_conformal, shown beside ours "
    "where the paper has the data set), on the same "
    "seeded splits as Rel-U and Doctor: an **MLP** trained on the tuning split's soft-predictions to predict "
    "errors (early stopping on a held-out part of the tuning split), **MC-Dropout** (10 passes with dropout 0.2 "
    "before the classifier head; entropy of the softmax of the averaged logits), **Deep Ensembles** (MSP of the "
    "average of several models' logits) and **conformal** prediction sets (APS, and RAPS with its rank penalty "
    f"λ = {baselines.RAPS_LAMBDA:g} per class beyond the k_reg = {baselines.RAPS_K_REG} most likely, calibrated on "
    "the tuning split; a prediction is rejected when its set holds more than one label). Rel-U (λ = 0.5) and "
    "Doctor at T = 1. "
    f"Every detector judges the run's own predictions; {protocol.FPR_CONVENTION}.",
    manual_page="how-to/baselines.md",
)

available = baselines.available_keys(run)
usable = [k for k in detectors.REGISTRY if available[k] is None]
slow = {k: why for k, why in baselines.trains_on_first_use(run).items() if k in usable}
defaults = session.bl_defaults(usable, slow)
session.share(session.BL_SHARED)  # the tuning fraction and the seeds every page shares
session.restore(defaults, session.BL_KEPT)  # the settings survive a visit to another page
st.session_state[session.BL_DETECTORS] = [k for k in st.session_state[session.BL_DETECTORS] if k in usable]

# ------------------------------------------------------------------------------------------- controls
with st.container(border=True):
    c_split, c_seeds, c_cov = st.columns(3)
    page.fraction_slider(c_split, "tuning split", key=session.BL_TUNE_FRACTION)
    c_seeds.number_input(
        "seeds (splits averaged)",
        help="The paper averages 10 seeds; each seed trains one MLP.",
        min_value=1,
        max_value=session.SEEDS_MAX,
        step=1,
        key=session.BL_SEEDS,
    )
    c_cov.slider("conformal coverage (1 − α)", min_value=0.5, max_value=0.99, step=0.01, key=session.BL_COVERAGE)
    st.multiselect("detectors", usable, format_func=detectors.label, key=session.BL_DETECTORS)
session.keep(defaults, session.BL_KEPT)
for why in slow.values():
    st.caption(why + ".")
unavailable = {k: reason for k, reason in available.items() if reason is not None and k in baselines.STUDY_KEYS}
if unavailable:
    st.info("Not available on this run: " + "; ".join(unavailable.values()) + ".")

options = {  # the arguments of baselines.baselines_study, and the settings its result is kept for
    "tune_fraction": float(st.session_state[session.BL_TUNE_FRACTION]),
    "seeds": tuple(range(int(st.session_state[session.BL_SEEDS]))),
    "coverage": round(float(st.session_state[session.BL_COVERAGE]), 4),
    "keys": tuple(st.session_state[session.BL_DETECTORS]),
}
if not options["keys"]:
    st.warning("Choose at least one detector.")
result = jobbox.study_run(
    session.BASELINES_PAGE,
    run.run_id,
    tuple(options.items()),
    f"Baselines: {count(len(options['keys']), 'detector')}, {count(len(options['seeds']), 'seed')}",
    lambda progress, cancel: baselines.baselines_study(run, **options, progress=progress, cancel=cancel),
    ready=bool(options["keys"]),
    hint="Model passes are cached, so later runs are quick.",
)
if result is None:
    st.stop()
st.caption(
    f"Tuning split {result.tune_fraction:.0%} · {count(len(result.seeds), 'seed')} · {result.n_tune:,} tuning / "
    f"{result.n_eval:,} evaluation samples per seed · conformal coverage {result.coverage:.0%}." + page.fixed_note()
)

# ------------------------------------------------------------------------------------------- table
st.subheader("Mean ± std over seeds")
table = result.table
# short headers ("AUGRC ↓") and the notes under the table: at 1280 x 720 the headers "AUGRC (lower is better)" and
# a note column pushed the last metrics out of the table's width
st.dataframe(
    {
        "detector": table["detector"],
        "learned": table["learned"],
        **{
            m.header: [m.mean_std(mean, std) for mean, std in zip(table[f"{m.key}_mean"], table[f"{m.key}_std"])]
            for m in map(metric_info.get, metric_info.PAIRED_KEYS)
        },
    },
    hide_index=True,
)
notes = [f"{detector}: {note}" for detector, note in zip(table["detector"], table["note"]) if note]
st.caption(
    "Each row: one detector judged on the evaluation splits, mean ± std over the seeds (population std, "
    'ddof = 0); the arrow in each header points the way that is better. "learned" detectors were fitted on the tuning split only. '
    "Only Rel-U − Doctor is tested (below): the other rows are not compared with each other, so close means are "
    "not a ranking." + plain(f" How they ran: {'; '.join(notes)}." if notes else "")
)
for paper_key, (reference, reference_notes) in baselines.paper_reference(result, run).items():
    if not reference.empty:
        st.markdown(baselines.paper_heading(paper_key))
        st.dataframe(reference, hide_index=True)
    for line in reference_notes:
        st.caption(line)
if result.paired:
    st.markdown("**Rel-U − Doctor, paired on the same evaluation samples**")
    st.dataframe(detector_comparison.paired_rows(result.paired), hide_index=True)
    st.caption(
        f"{100 * next(iter(result.paired.values())).confidence:g} % paired bootstrap interval of the mean over "
        f"{count(len(result.seeds), 'seed')}; a verdict of "
        '"no significant difference" means the interval covers 0.'
    )

# ------------------------------------------------------------------------------------------- figures
roc, rc = baselines.study_figures(result)
left, right = st.columns(2)
with left:
    page.chart(st, roc, "baselines_roc", key=session.BL_ROC)
    st.caption(
        "Each curve shows, for one detector, the share of correct predictions accepted (up) against the "
        "share of errors wrongly accepted (right) as its threshold moves; higher and further left is better."
    )
with right:
    page.chart(st, rc, "baselines_risk_coverage", key=session.BL_RISK_COVERAGE)
    st.caption(
        "Each curve shows the error rate among the accepted predictions (up) when a detector keeps only its "
        "most confident fraction of the samples (right); lower is better."
    )

# ------------------------------------------------------------------------------------------- downloads
row1, row2 = st.columns(3), st.columns(3)
page.download_button(
    row1[0],
    "Table (CSV)",
    csv_text.frame_csv(table),
    "baselines.csv",
    key=session.BL_DL_TABLE,
)
page.download_button(
    row1[1],
    "Per-seed values (CSV)",
    csv_text.frame_csv(result.per_seed),
    "baselines_per_seed.csv",
    key=session.BL_DL_SEEDS,
)
for column, (name, fig) in zip(row2, (("roc", roc), ("risk_coverage", rc))):
    page.download_button(
        column,
        f"{fig.layout.title.text.split(' (')[0].split(',')[0]} (HTML)",
        lambda fig=fig: fig.to_html(include_plotlyjs=True, full_html=True),  # built when clicked (~5 MB)
        f"baselines_{name}.html",
        key=session.item_key(session.BL_DOWNLOAD, name, "html"),
    )
    page.download_button(
        column,
        f"{fig.layout.title.text.split(' (')[0].split(',')[0]} data (CSV)",
        figures.figure_csv(fig),
        f"baselines_{name}.csv",
        key=session.item_key(session.BL_DOWNLOAD, name, "csv"),
    )
st.caption("The HTML figures hold plotly.js and open offline; the camera button on each chart saves a PNG.")
