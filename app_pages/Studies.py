"""Studies: the paper's ablations, tuning-split size, label-domain mismatch and calibration on the current run.

A thin page: pick a study, set its options, run it through the shared job box (progress, device, Cancel); the
numbers come from ``relu_core.studies`` (cached on disk by their settings) and the figures from
``relu_core.studies.figures``, each with a sentence saying what it shows and CSV / HTML downloads (PNG or SVG:
the chart's camera button, drawn by the browser).
"""

from __future__ import annotations

import streamlit as st

from relu_core import figures, onnx_model, protocol, scorecard
from relu_core.progress import count
from relu_core.studies import STUDIES, ablation, calibration, ladder, paper_table
from relu_core.studies import figures as study_figures
from studio import eps_choice, jobbox, page, query, session
from studio.text import plain

run = page.page_header(
    "The paper's studies",
    "Every study fits D* on tuning splits only and scores the evaluation splits only, averages over seeded splits "
    "(mean ± std) and reports the paired difference Rel-U − Doctor with its 95 % bootstrap interval. "
    f"Convention: {protocol.FPR_CONVENTION}. Results are cached by their settings.",
    manual_page="how-to/studies.md",
)

has_model = run.model is not None and run.images is not None
defaults = {**session.study_defaults(), session.STUDY_EPS_GRID: session.EPS_GRID_DEFAULT}
session.share(session.STUDY_SHARED)  # the tuning fraction and the seeds every page shares
session.restore(defaults, session.STUDY_KEPT)  # the options survive another study's or another page's run
asked = query.take_study_param()  # the Start scorecard's link: open its study at its settings
if asked in STUDIES:
    st.session_state[session.STUDY_NAME] = asked
if asked == "mismatch" and has_model and scorecard.other_datasets(run):
    scorecard_options = scorecard.mismatch_options(run, session.shared())
    fraction = scorecard_options["fractions"][0]
    preset = fraction in protocol.TUNE_FRACTION_PRESETS
    st.session_state.update(
        {
            session.STUDY_FRACTIONS: [fraction] if preset else [],
            session.STUDY_EXTRA_FRACTIONS: "" if preset else f"{fraction:g}",
            session.STUDY_OTHER: scorecard_options["other"],
            session.STUDY_BOOTSTRAP: scorecard_options["n_resamples"],
            session.STUDY_EXCLUDE: "",
        }
    )
AXIS_LABELS = {"lambda": "λ (0..1)", "temperature": "T (0.1..1000, log)", "eps": "ε (paper's grid; needs a model)"}

name = st.radio(
    "study",
    list(STUDIES),
    format_func=lambda n: STUDIES[n].title.split(":")[0],
    horizontal=True,
    key=session.STUDY_NAME,
)
study = STUDIES[name]
st.markdown(f"**{study.title}.** {study.description}.")


def _controls() -> dict:
    """The options of the chosen study (validated by the library when it runs)."""
    options: dict = {}
    with st.container(border=True):
        c1, c2, c3 = st.columns(3)
        seeds = c1.number_input(
            "seeds (splits averaged)", min_value=1, max_value=session.SEEDS_MAX, step=1, key=session.STUDY_SEEDS
        )
        options["seeds"] = int(seeds)
        options["n_resamples"] = int(
            c2.number_input(
                "bootstrap resamples per point (0 = none)",
                min_value=0,
                max_value=10_000,
                step=100,
                key=session.STUDY_BOOTSTRAP,
            )
        )
        if name in ("ablation", "calibration", "paper-protocol"):
            options["tune_fraction"] = page.fraction_slider(c3, "tuning fraction", key=session.STUDY_FRACTION)
        if name == "paper-protocol":
            epsilons = eps_choice.grid_choice(
                st, "ε searched from rung 3 on", key=session.STUDY_EPS_GRID, reason=eps_choice.why_not(run)
            )
            if epsilons is not None:  # part of the job's key and the study's cache key
                options["epsilons"] = epsilons
        if name in ("tuning-split", "mismatch"):
            # a row of their own: in a third of the width the four presets' chips were hidden at 1280 x 720
            f1, f2 = st.columns(2)
            chosen = f1.multiselect(
                "tuning fractions",
                list(protocol.TUNE_FRACTION_PRESETS),
                key=session.STUDY_FRACTIONS,
                format_func=lambda f: f"{f:.0%}",
            )
            extra = f2.text_input(
                "more tuning fractions (comma-separated, e.g. 0.05, 0.7)", key=session.STUDY_EXTRA_FRACTIONS
            )
            options["fractions"] = [*chosen, *(float(p) for p in extra.split(",") if p.strip())]
        if name == "ablation":
            axes = list(ablation.AXES) if has_model else ["lambda", "temperature"]
            if st.session_state[session.STUDY_AXES] and not set(st.session_state[session.STUDY_AXES]) <= set(axes):
                st.session_state[session.STUDY_AXES] = [a for a in st.session_state[session.STUDY_AXES] if a in axes]
            options["axes"] = st.multiselect("axes", axes, key=session.STUDY_AXES, format_func=AXIS_LABELS.get)
            if run.onnx_file:
                st.caption(f"{onnx_model.NO_EPS}.")
            elif not has_model:
                st.caption("The ε axis perturbs the inputs: it needs a run with its model and images.")
            if "eps" in options["axes"]:
                subsample = st.number_input(
                    "images for the ε axis (0 = every image)",
                    min_value=0,
                    step=100,
                    key=session.STUDY_SUBSAMPLE,
                    help=f"A seeded subsample keeps CPU runs short; this run has {len(run.labels):,}.",
                )
                options["subsample"] = int(subsample) or None
        if name == "mismatch" and has_model:
            fitting = scorecard.other_datasets(run)  # on this machine, with the run's image shape, not its own
            shape = tuple(run.images.shape[1:])
            options["other"] = None
            if fitting:
                if st.session_state[session.STUDY_OTHER] not in fitting:
                    st.session_state[session.STUDY_OTHER] = fitting[0]
                options["other"] = st.selectbox(
                    "other data set (its images go through this run's model)",
                    fitting,
                    key=session.STUDY_OTHER,
                    help="the data sets on this machine whose images "
                    f"have this run's shape ({'x'.join(map(str, shape))})",
                )
            exclude = st.text_input(
                "classes of the other set to drop (comma-separated; empty: the paper's 13 for "
                "CIFAR-100, none otherwise)",
                key=session.STUDY_EXCLUDE,
            )
            if exclude.strip():
                options["exclude"] = [c.strip() for c in exclude.split(",") if c.strip()]
    return options


try:
    options = _controls()
    session.keep(defaults, session.STUDY_KEPT)
except ValueError as exc:
    jobbox.show_error(ValueError(f"a tuning fraction is not a number: {exc}"))
    st.stop()

if study.needs_model and not has_model:
    st.info(
        "This study runs the model on another data set: choose a run with a model and its images in the sidebar "
        "(e.g. Fashion-MNIST with the small CNN against MNIST, or CIFAR-10 with a ResNet against CIFAR-100)."
    )
    st.stop()
if name == "mismatch" and options["other"] is None:
    st.info(
        f"No other data set on this machine has {'x'.join(map(str, run.images.shape[1:]))} images like this "
        f"run's ({run.dataset_name or 'its data set'}), so its model cannot take one: choose a run such as "
        "Fashion-MNIST with the small CNN (against MNIST) or CIFAR-10 with a ResNet (against CIFAR-100)."
    )
    st.stop()

shared = session.shared()
result = jobbox.study_run(
    session.STUDIES_PAGE,
    (run.run_id, name),
    repr(sorted(options.items())),
    f"{study.title.split(':')[0]} study",
    lambda progress, cancel: study.run(run, progress=progress, cancel=cancel, **options),
    # the Start page's scorecard runs this very mismatch study at its settings: its result needs no press here
    found=(
        (lambda: scorecard.finished(run, "mismatch", shared))
        if name == "mismatch" and options == scorecard.mismatch_options(run, shared)
        else None
    ),
)
if result is None:
    st.stop()

seeds_used = result.settings.get("seeds", [])
st.caption(
    count(len(seeds_used), "seed")
    + (
        f"; ε axis: {count(len(result.settings['seeds_eps']), 'seed')} on {result.settings['subsample']:,} images"
        if "seeds_eps" in result.settings
        else ""
    )
    + f"; settings: {study_figures.settings_text(result.settings)}."
    # every study holds T = 1 and λ = 0.5 but on the axis it sweeps; the ladder selects them, rung by rung
    + ("" if name == "paper-protocol" else page.fixed_note())
)
for note in result.notes:
    st.caption(plain(f"Note: {note}"))

if "summary" in result.tables:
    st.subheader("Before and after temperature scaling (mean and std over seeds)")
    headers = {
        "uncalibrated_mean": "T = 1: mean",
        "uncalibrated_std": "T = 1: std",
        "calibrated_mean": "T = T_cal: mean",
        "calibrated_std": "T = T_cal: std",
    }
    st.dataframe(result.tables["summary"].rename(columns=headers), hide_index=True)
    reference, reference_notes = calibration.paper_reference(result, run)
    if not reference.empty:
        st.markdown(calibration.paper_heading())
        st.dataframe(reference, hide_index=True)
    for line in reference_notes:
        st.caption(line)

if "ladder" in result.tables:
    st.subheader("Rel-U − Doctor, rung by rung")
    st.caption(
        "Each rung changes one thing from the rung above (rung 5 two). Rungs 1-4: the 95 % paired bootstrap "
        "interval (conditional on the selected settings; rung 4's is "
        + ladder.ORACLE_INTERVAL
        + "); rungs 5-6 are the difference of each detector's mean of its five lowest-FPR95 rows (not paired: the "
        "rows may come from different seeds), a minimum over settings and seeds measured on the evaluation split: "
        "no interval is valid for them."
    )
    st.dataframe(ladder.display_table(result), hide_index=True)
    reference, reference_notes = paper_table.ladder_reference(run)
    if not reference.empty:
        st.markdown(paper_table.ladder_heading())
        st.dataframe(reference, hide_index=True)
    for line in reference_notes:
        st.caption(line)

image_format = st.radio(
    "the camera button of each chart saves",
    ["png", "svg"],
    horizontal=True,
    key=session.STUDY_IMAGE_FORMAT,
    help="Drawn by your browser (no server-side rendering needed).",
)
for slug, fig, sentence in study_figures.figures_for(result):
    config = figures.chart_config(page.run_tagged(f"{name}_{slug}"))
    config["toImageButtonOptions"] = {**config["toImageButtonOptions"], "format": image_format}
    page.chart(st, fig, slug, key=session.item_key(session.STUDY_CHART, slug), config=config)
    st.caption(sentence)
    c1, c2 = st.columns(2)
    page.download_button(
        c1,
        "data (CSV)",
        study_figures.figure_csv(fig),
        f"{name}_{slug}.csv",
        key=session.item_key(session.STUDY_DOWNLOAD, "csv", slug),
    )
    page.download_button(
        c2,
        "interactive figure (HTML)",
        lambda fig=fig, sentence=sentence: study_figures.figure_html(fig, sentence),
        f"{name}_{slug}.html",
        key=session.item_key(session.STUDY_DOWNLOAD, "html", slug),
    )

if not result.paired.empty:
    st.subheader("Rel-U − Doctor, paired, per point")
    st.dataframe(study_figures.paired_table(result), hide_index=True)

st.subheader("All numbers")
columns = st.columns(len(result.csv_files()))
for col, (file_name, text) in zip(columns, result.csv_files().items()):
    page.download_button(
        col,
        file_name,
        text,
        f"{name}_{file_name}",
        key=session.item_key(session.STUDY_DOWNLOAD, file_name),
    )
