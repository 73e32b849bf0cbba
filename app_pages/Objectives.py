"""Training objectives: the paper's Table 1 for one data set and a small CNN. One model per objective
(cross-entropy, LogitNorm, MixUp, RegMixUp, OpenMix) is trained here when it is not cached, then MSP, ODIN, Doctor
and Rel-U are evaluated on its test logits over seeded splits, with Rel-U − Doctor and its paired interval per row.
A thin page: the widgets, one call to ``relu_core.studies.objectives.objectives_study`` through the shared job box
(progress per model and epoch, Cancel: a cancelled training resumes from its last epoch), the table, and a button
per row that opens that model's run in Explore.
"""

from __future__ import annotations

import json

import streamlit as st

from relu_core import csv_text, protocol
from relu_core.progress import count
from relu_core.studies import objectives
from studio import frame, jobbox, page, session
from studio.runs import select_run

st.title("Training objectives: where does Rel-U help?")
st.markdown(
    "The paper's Table 1 asks how the way a classifier was trained changes which detector tells its errors apart "
    "best. Here one small CNN per objective is trained on the data set's **training split** (early stopping on a "
    "held-out part of it, never on test images), and MSP, ODIN, Doctor and Rel-U are compared on its **test "
    "split**, split into tuning and evaluation parts over seeds. By default T (and λ for Rel-U) are chosen per seed "
    "by cross-validation inside the tuning part, as the paper does; the evaluation part is never used to choose. "
    f"{protocol.FPR_CONVENTION}. Models and logits are cached: a second visit shows the table in seconds."
)

available = objectives.trainable_datasets()
if not available:
    st.info("No data set with a training split is on this machine (Fashion-MNIST or digits are needed).")
    st.stop()
default_dataset = "fashion-mnist" if "fashion-mnist" in available else next(iter(available))


def _trainable(dataset: str) -> list[str]:
    """The objectives the data set can train: OpenMix needs an outlier set of the same image size."""
    return [o for o in objectives.OBJECTIVES if o != "openmix" or dataset in objectives.DEFAULT_OUTLIERS]


session.share(session.OBJ_SHARED)  # the seeds every page shares
session.restore(session.obj_defaults(default_dataset, _trainable(default_dataset)), session.OBJ_KEPT)
with st.container(border=True):
    c_data, c_obj = st.columns([2, 5])
    dataset = c_data.selectbox(
        "data set (its small CNN)",
        list(available),
        format_func=lambda name: f"{name} ({available[name]})",
        key=session.OBJ_DATASET,
    )
    choices = _trainable(dataset)
    st.session_state[session.OBJ_OBJECTIVES] = [o for o in st.session_state[session.OBJ_OBJECTIVES] if o in choices]
    c_obj.multiselect("objectives", choices, key=session.OBJ_OBJECTIVES)
    c_epochs, c_seeds, c_sel = st.columns([1, 1, 3])
    c_epochs.number_input("epoch cap", min_value=1, max_value=30, step=1, key=session.OBJ_EPOCHS)
    c_seeds.number_input("split seeds", min_value=1, max_value=session.SEEDS_MAX, step=1, key=session.OBJ_SEEDS)
    c_sel.radio(
        "T and λ",
        objectives.SELECTIONS,
        format_func=lambda s: (
            "chosen inside each tuning split (the paper's)" if s == "tuning" else "fixed: T = 1, λ = 0.5"
        ),
        horizontal=True,
        key=session.OBJ_SELECTION,
    )
    if "openmix" not in choices:
        st.caption(f"OpenMix needs an outlier data set of {dataset}'s image size; none is registered.")
    elif dataset in objectives.DEFAULT_OUTLIERS:
        st.caption(f"OpenMix mixes in {objectives.DEFAULT_OUTLIERS[dataset]} images as outliers.")
session.keep(
    [session.OBJ_DATASET, session.OBJ_OBJECTIVES, session.OBJ_EPOCHS, session.OBJ_SEEDS, session.OBJ_SELECTION],
    session.OBJ_KEPT,
)

options = {  # the arguments of objectives_study, and the settings its result is kept for
    "dataset": dataset,
    "model": available[dataset],
    "objectives": tuple(st.session_state[session.OBJ_OBJECTIVES]),
    "epochs": int(st.session_state[session.OBJ_EPOCHS]),
    "seeds": int(st.session_state[session.OBJ_SEEDS]),
    "tune_fraction": session.shared().tune_fraction,  # the shared tuning fraction (set on the other pages)
    "selection": st.session_state[session.OBJ_SELECTION],
}
result = jobbox.study_run(
    session.OBJECTIVES_PAGE,
    dataset,
    tuple(options.items()),
    f"Training objectives on {dataset}: {count(len(options['objectives']), 'model')}",
    lambda progress, cancel: objectives.objectives_study(**options, progress=progress, cancel=cancel),
    ready=bool(options["objectives"]),
    hint="Models missing from the cache are trained first (about 6.5 minutes for the five Fashion-MNIST models "
    "on 2 CPU cores at an epoch cap of 1, half a minute at 2 on a GPU; seconds for digits).",
)
if result is None:
    st.stop()

st.caption(
    f"{result.model} on {result.dataset} · epoch cap {result.epochs} · training seed {result.train_seed} · "
    f"{count(len(result.seeds), 'split seed')} · tuning split {result.tune_fraction:.0%} · "
    + ("T and λ chosen inside each tuning split" if result.selection == "tuning" else "fixed T = 1, λ = 0.5")
)
table = result.table()
st.dataframe(table, hide_index=True)
st.caption(
    "FPR95 and AUROC: mean (std) over the split seeds; * marks each row's lowest FPR95. Rel-U − Doctor: the "
    "FPR95 difference with its 95 % paired bootstrap interval pooled over the seeds, and the verdict in words "
    '("no significant difference" when the interval covers 0).'
    + (
        " Under selection the interval is conditional on the settings each seed chose: it does not resample the "
        "choice itself."
        if result.selection == "tuning"
        else ""
    )
)

st.markdown("**Open a model's run** (Explore, and the run picker of every page, Compare runs included):")
buttons = st.columns(len(result.rows))
for column, row in zip(buttons, result.rows, strict=True):
    if column.button(row.objective, key=session.item_key(session.OBJ_OPEN, row.objective)):
        select_run(row.run)
        frame.switch_to(frame.EXPLORE)

row = st.columns(2)
page.download_button(
    row[0],
    "Table (CSV)",
    csv_text.frame_csv(table),
    "objectives.csv",
    key=session.item_key(session.OBJ_DOWNLOAD, "csv"),
)
page.download_button(
    row[1],
    "Everything (JSON)",
    json.dumps(result.to_dict(), indent=1),
    "objectives.json",
    key=session.item_key(session.OBJ_DOWNLOAD, "json"),
)
