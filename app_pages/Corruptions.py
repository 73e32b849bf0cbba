"""Corruptions: the paper's mismatch study on the current run (tuned on clean data, evaluated on corrupted data).

A thin page: the widgets, one call to ``relu_core.robustness.mismatch_study`` through the shared job box
(progress, device, Cancel), and the figures of ``relu_core.figures``. Results are kept per (run, settings) in
the session; the corrupted logits themselves are cached on disk by the engine, so a rerun, a revisit or a
change of severity only computes what is missing.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from relu_core import (
    corruptions,
    csv_text,
    detector_comparison,
    detectors,
    explore,
    figures,
    metric_info,
    protocol,
    robustness,
    scorecard,
)
from relu_core.progress import count
from relu_core.runs import get_run
from relu_core.studies import paper_table
from studio import jobbox, page, session
from studio.text import plain

#: The per-corruption table's verdict column in pixels: "no significant difference" whole.
VERDICT_WIDTH = 200

run = page.page_header(
    "Robustness under corruption",
    "The paper's mismatch study: D* and the hyperparameters (T, and λ for Rel-U) are chosen by a "
    "cross-validated grid search on a **clean tuning split only**; the detectors then judge the model's "
    "predictions on **corrupted** copies of the evaluation images (the 19 CIFAR-10-C corruptions of Hendrycks "
    "& Dietterich). Neither the clean nor the corrupted evaluation images take part in the tuning. "
    f"Positives are correctly classified samples ({protocol.FPR_CONVENTION}).",
    manual_page="how-to/corruptions.md",
)

try:
    robustness.check_run(run)
except robustness.RobustnessError as exc:
    st.info(
        f"{exc}. Choose a run with a model and its images in the sidebar: the embedded digits default, a "
        "registered data set with a model, or an uploaded checkpoint with a data set."
    )
    st.stop()

N_IMAGES = len(run.labels)
defaults = session.rob_defaults()
session.share(session.ROB_SHARED)  # the tuning fraction and the seeds every page shares
session.restore(defaults, session.ROB_KEPT)  # the settings survive a visit to another page

# ------------------------------------------------------------------------------------------- controls
with st.container(border=True):
    c_sev, c_split, c_sub, c_det = st.columns([1.6, 2, 2, 2.4])
    c_sev.select_slider(
        "severity",
        options=corruptions.SEVERITIES,
        key=session.ROB_SEVERITY,
        help="The paper's radar plots use severity 5.",
    )
    page.fraction_slider(c_split, "clean tuning split", key=session.ROB_TUNE_FRACTION)
    c_split.number_input(
        "seeds (splits averaged)", min_value=1, max_value=session.SEEDS_MAX, step=1, key=session.ROB_SEEDS
    )
    c_sev.selectbox(
        "selection criterion",
        list(metric_info.KEYS),
        key=session.ROB_CRITERION,
        format_func=lambda c: metric_info.get(c).name,
        help="What the cross-validated grid search over T and λ on the clean tuning split optimises.",
    )
    c_sub.number_input(
        "images per corruption (0 = all)",
        min_value=0,
        step=100,
        key=session.ROB_SUBSAMPLE,
        help=f"A seeded subsample keeps CPU runs to minutes; this run has {N_IMAGES:,} images. "
        "The default is all images when a GPU is present.",
    )
    c_det.multiselect(
        "detectors", list(detectors.protocol_keys()), format_func=detectors.label, key=session.ROB_DETECTORS
    )
    st.multiselect("corruptions", list(corruptions.CORRUPTIONS), key=session.ROB_CORRUPTIONS)
session.keep(defaults, session.ROB_KEPT)

subsample = int(st.session_state[session.ROB_SUBSAMPLE]) or None
options = {  # the arguments of robustness.mismatch_study, and the settings its result is kept for
    "severity": int(st.session_state[session.ROB_SEVERITY]),
    "tune_fraction": float(st.session_state[session.ROB_TUNE_FRACTION]),
    "seeds": tuple(range(int(st.session_state[session.ROB_SEEDS]))),
    "subsample": None if subsample is None or subsample >= N_IMAGES else subsample,
    "detector_keys": tuple(st.session_state[session.ROB_DETECTORS]),
    "corruption_names": tuple(st.session_state[session.ROB_CORRUPTIONS]),
    "criterion": str(st.session_state[session.ROB_CRITERION]),
}
names = options["corruption_names"]
ready = len(names) >= 3 and len(options["detector_keys"]) >= 1
if not ready:
    st.warning("Choose at least 3 corruptions (one vertex each on the radar plots) and at least one detector.")
shared = session.shared()
result = jobbox.study_run(
    session.CORRUPTIONS_PAGE,
    run.run_id,
    tuple(options.items()),
    f"Corruption study: {len(names)} corruptions at severity {options['severity']}, "
    f"{options['subsample'] or N_IMAGES:,} images each",
    lambda progress, cancel: robustness.mismatch_study(run, **options, progress=progress, cancel=cancel),
    ready=ready,
    hint="Corrupted images and their logits are cached, so later runs are quick.",
    # the Start page's scorecard runs this very study at the defaults: its result needs no press here
    found=(
        (lambda: scorecard.finished(run, "corruptions", shared))
        if options == scorecard.corruption_options(run, shared)
        else None
    ),
)
if result is not None:
    n_seeds = len(result.seeds)
    st.caption(
        f"Severity {result.severity} · clean tuning split {result.tune_fraction:.0%} · {count(n_seeds, 'seed')} · "
        f"{min(result.n_eval):,}–{max(result.n_eval):,} corrupted evaluation images per seed (the study's images "
        'outside that seed\'s tuning split; the row "clean" scores the same images uncorrupted: with a subsample '
        "it is not the whole split's result) · corrupted images: " + ", ".join(sorted(set(result.sources.values())))
    )

    fallback = result.hyperparameters.loc[result.hyperparameters["hamming_fallback"], "seed"].tolist()
    if fallback and {"Rel-U", "Doctor"} <= set(result.hyperparameters["detector"]):
        st.info(
            f"On {'seed' if len(fallback) == 1 else 'seeds'} {', '.join(map(str, fallback))} of {n_seeds}, Rel-U's D* is the "
            f"{protocol.FALLBACK_LABEL}: the clean tuning split left D* empty, so Rel-U ranks exactly like Doctor there."
        )
    searched = result.hyperparameters.groupby("detector", sort=False)["settings_searched"].first()
    st.caption(
        "Settings searched by the cross-validated selection on the clean tuning split: "
        + ", ".join(f"{d} {count(n, 'setting')}" for d, n in searched.items())
        + "."
    )

    # ------------------------------------------------------------------ radar plots
    auroc, fpr = result.pivot("auroc"), result.pivot("fpr95")
    axes = list(auroc.index)
    drawn = sorted(auroc.columns, key=lambda d: d == "Rel-U")  # Rel-U last, on top where polygons coincide
    low = min(0.5, float(np.floor(np.nanmin(auroc.to_numpy(), initial=1.0) * 10) / 10))
    # two title lines: one line was cut at half a 1280 px page
    over = f"<br><sup>severity {result.severity}, mean over {count(n_seeds, 'seed')}</sup>"

    def significantly_better(metric: str) -> dict[str, str]:
        """Corruption -> the detector significantly better there on ``metric`` (none where no interval)."""
        if result.paired.empty:
            return {}
        rows = result.paired[(result.paired["metric"] == metric) & (result.paired["corruption"] != robustness.CLEAN)]
        outcomes = zip(rows["corruption"], detector_comparison.outcome_column(rows), strict=True)
        return {
            corruption: outcome.removesuffix(" better")
            for corruption, outcome in outcomes
            if outcome.endswith(" better")
        }

    # one radar per row: side by side, 19 corruption names collided on circles of half the page's width
    for metric, values, radial_range, key in (
        (metric_info.AUROC, auroc, (low, 1.0), session.ROB_RADAR_AUROC),
        (metric_info.FPR95, fpr, (0.0, 1.0), session.ROB_RADAR_FPR),
    ):
        fig = figures.radar_figure(
            axes,
            {d: values[d].to_numpy() for d in drawn},
            title=f"{metric.title}{over}",
            radial_range=radial_range,
            better=significantly_better(metric.key),
        )
        page.chart(st, fig, f"radar_{metric.key}", key=key)
    if not result.paired.empty:
        st.caption(
            f"{figures.BETTER_MARK} and a detector's name under a corruption's: that detector is significantly better "
            "there (the paired 95 % interval of Rel-U − Doctor on that metric excludes 0; the star sits on its "
            "polygon). Elsewhere there is no significant difference, however far apart the polygons look."
        )

    # ------------------------------------------------------------------ paired statistics
    if not result.paired.empty:
        st.subheader("Rel-U − Doctor, paired, per corruption")
        corrupted_rows = result.paired[result.paired["corruption"] != robustness.CLEAN]
        for metric in ("auroc", "fpr95"):
            rows = corrupted_rows[corrupted_rows["metric"] == metric]
            outcomes = detector_comparison.outcome_column(rows)
            wins, losses = outcomes.count("Rel-U better"), outcomes.count("Doctor better")
            st.markdown(
                f"**{metric_info.get(metric).label}**: Rel-U significantly better on {wins}, significantly worse on "
                f"{losses}, no significant difference on {len(rows) - wins - losses} of {len(rows)} corruptions "
                f"(95 % paired bootstrap interval of the mean over {count(n_seeds, 'seed')})."
            )
        st.dataframe(  # the verdict's width fixed: sized on the first rows ("Rel-U better"), it cut "no signific…"
            detector_comparison.paired_table(result.paired, corruption=result.paired["corruption"]),
            hide_index=True,
            column_config={"verdict": st.column_config.TextColumn("verdict", width=VERDICT_WIDTH)},
        )
        st.caption(
            "Each row: the difference Rel-U − Doctor on the same corrupted evaluation images, mean ± std "
            "over seeds (population std, ddof = 0), and whether the 95 % interval excludes 0 (the images are "
            "resampled once for all seeds, whose evaluation images overlap). Each corruption is tested on its "
            f"own, without a correction for the {len(corrupted_rows['corruption'].unique())} comparisons: with no "
            "real difference about one in twenty would still read as significant. The radar plots above show "
            "the means."
        )

    # ------------------------------------------------------------------ accuracy
    corrupted = result.accuracy[result.accuracy["corruption"] != robustness.CLEAN]
    fig = figures.accuracy_bars(
        list(corrupted["corruption"]),
        corrupted["mean"].to_numpy(),
        clean_accuracy=result.clean_accuracy,
        x_title="corruption",
        title=f"Accuracy per corruption (severity {result.severity}) and clean accuracy (dashed), "
        "same evaluation images",
    )
    page.chart(st, fig, "accuracy_per_corruption", key=session.ROB_ACCURACY)
    st.caption(
        f"Clean accuracy {result.clean_accuracy:.2%}; mean corrupted accuracy {corrupted['mean'].mean():.2%} "
        f"(gap {100 * (result.clean_accuracy - corrupted['mean'].mean()):.2f} percentage points)."
    )

    # ------------------------------------------------------------------ table and downloads
    st.subheader("Mean ± std over seeds, per corruption and detector")
    st.dataframe(result.summary_table(), hide_index=True)
    reference, reference_notes = paper_table.corruption_reference(result, run)
    if not reference.empty:
        st.markdown(paper_table.corruption_heading(result.tune_fraction))
        st.dataframe(reference, hide_index=True)
    for line in reference_notes:
        st.caption(line)
    downloads = (
        ("Table (CSV: corruption, severity, detector, metric, mean, std)", result.table, "", session.ROB_DL_TABLE),
        ("Per-seed values (CSV)", result.per_seed, "_per_seed", session.ROB_DL_SEEDS),
    )
    for column, (label, frame, part, key) in zip(st.columns(2), downloads):
        page.download_button(
            column, label, csv_text.frame_csv(frame), f"corruptions_severity{result.severity}{part}.csv", key=key
        )
    with st.expander("Hyperparameters selected on each clean tuning split"):
        st.dataframe(explore.readable_hyperparameters(result.hyperparameters), hide_index=True)


# ------------------------------------------------------------------------------------------- gallery
@st.cache_data(max_entries=32, show_spinner="Corrupting the image at every severity…")
def gallery(run_id: str, index: int) -> np.ndarray:
    """The image ``index`` of a run under every corruption and severity (K, 5, H, W, C)."""
    return robustness.corruption_gallery(get_run(run_id).images[index])


st.subheader("Gallery: one image under every corruption and severity")
if not 0 <= st.session_state[session.ROB_IMAGE] < N_IMAGES:  # the run changed to a smaller one
    st.session_state[session.ROB_IMAGE] = 0
st.number_input("image index", min_value=0, max_value=N_IMAGES - 1, step=1, key=session.ROB_IMAGE)
index = int(st.session_state[session.ROB_IMAGE])
st.caption(
    plain(f"Image #{index}, true class {run.class_names[run.labels[index]]}. Columns: clean, then severity 1 to 5.")
)
grid = gallery(run.run_id, index)
clean = explore.thumbnail(run.images[index], size=96)
for k, name in enumerate(corruptions.CORRUPTIONS):
    label, images = st.columns([1, 6])
    label.markdown(f"**{name}**")
    images.image(
        [clean, *(explore.thumbnail(image, size=96) for image in grid[k])],
        caption=["clean", *(f"severity {s}" for s in corruptions.SEVERITIES)],
    )
