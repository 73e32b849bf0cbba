"""Training objectives: the paper's Table 1 for one data set and network. One model per objective (cross-entropy,
LogitNorm, MixUp, RegMixUp, OpenMix) is trained here under a named recipe when it is not cached, then MSP, ODIN,
Doctor and Rel-U are evaluated on its test logits over seeded splits, with Rel-U − Doctor and its paired interval per
row, honest selection beside the oracle one, and the paper's own row where it matches.
A thin page: the answer in one sentence first, the widgets, one call to
``relu_core.studies.objectives.objectives_study`` through the shared job box (progress per model and epoch, Cancel:
a cancelled training resumes from its last epoch), the tables, and a button per row that opens that model's run in
Explore.
"""

from __future__ import annotations

import json

import streamlit as st

from relu_core import csv_text, engine, models, protocol, training
from relu_core.progress import count
from relu_core.studies import objectives, paper_table
from relu_core.training import estimate
from studio import eps_choice, frame, jobbox, page, session
from studio.runs import select_run

# a subheader like every page's heading (studio.page.page_header): a title took two lines and 90 px at 1280 x 720
st.subheader("Training objectives: where does Rel-U help?", help=page.manual_help("how-to/training-objectives.md"))
answer_slot = st.empty()  # the answer, in one sentence, once the table is computed

gpu = engine.select_device("auto").type == "cuda"
available = objectives.trainable_datasets(gpu)
if not available:
    answer_slot.info("No data set with a training split is on this machine (Fashion-MNIST, digits or CIFAR-10).")
    st.stop()
# the page opens on the current run's data set where it can train (a run's own name is e.g. "cifar10-test")
run_dataset = objectives.run_dataset(frame.current_run(), list(available))
default_dataset = run_dataset or ("fashion-mnist" if "fashion-mnist" in available else next(iter(available)))
if st.session_state.get(session.OBJ_OPENED_FOR) != st.session_state[session.RUN_ID]:  # a run made current since
    st.session_state[session.OBJ_OPENED_FOR] = st.session_state[session.RUN_ID]
    if run_dataset is not None:
        st.session_state[session.OBJ_DATASET] = run_dataset


def _defaults_for(dataset: str, model: str, recipe: str) -> int:
    return objectives.default_epochs(recipe, model)


default_recipe = training.recipes.default_for(default_dataset)
session.share(session.OBJ_SHARED)  # the seeds every page shares
session.restore(
    session.obj_defaults(
        default_dataset,
        list(objectives.supported_objectives(default_dataset)),
        available[default_dataset],
        default_recipe,
        _defaults_for(default_dataset, available[default_dataset], default_recipe),
    ),
    session.OBJ_KEPT,
)
session.restore({session.OBJ_EPS_GRID: session.EPS_GRID_DEFAULT}, session.OBJ_KEPT)
with st.container(border=True):
    c_data, c_model, c_recipe = st.columns([2, 2, 2])
    dataset = c_data.selectbox("data set", list(available), key=session.OBJ_DATASET)
    networks = models.trainable_models(dataset, gpu)
    last = st.session_state.get(session.OBJ_DEFAULTED_FOR)
    if last is not None and last[0] != dataset:  # a new data set: its own network, recipe and objectives
        st.session_state[session.OBJ_MODEL] = networks[0]
        st.session_state[session.OBJ_RECIPE] = training.recipes.default_for(dataset)
        st.session_state[session.OBJ_OBJECTIVES] = list(objectives.supported_objectives(dataset))
    if st.session_state.get(session.OBJ_MODEL) not in networks:
        st.session_state[session.OBJ_MODEL] = networks[0]
    model = c_model.selectbox(
        "network",
        networks,
        key=session.OBJ_MODEL,
        help="; ".join(f"{n}: {models.get_spec(n).description}" for n in networks),
    )
    recipe = c_recipe.selectbox(
        "training recipe",
        list(training.PRESETS),
        format_func=lambda name: name + (" (default)" if name == training.recipes.default_for(dataset) else ""),
        key=session.OBJ_RECIPE,
    )
    choice = (dataset, model, recipe)
    if st.session_state.get(session.OBJ_DEFAULTED_FOR) != choice:  # a new choice: its own epoch cap
        if last is not None:
            st.session_state[session.OBJ_EPOCHS] = _defaults_for(*choice)
        st.session_state[session.OBJ_DEFAULTED_FOR] = choice
    choices = list(
        objectives.supported_objectives(dataset, (*objectives.OBJECTIVES, "regmixup-appendix"))
    )  # the appendix's RegMixUp can be added
    st.session_state[session.OBJ_OBJECTIVES] = [o for o in st.session_state[session.OBJ_OBJECTIVES] if o in choices]
    st.multiselect("objectives", choices, key=session.OBJ_OBJECTIVES)
    # one row: a caption or a row of its own would push "Run the study" below a 1280 x 720 viewport
    c_epochs, c_seeds, c_sel, c_eps = st.columns([1, 1, 3, 2])
    c_epochs.number_input(
        "epoch cap",
        min_value=1,
        max_value=400,
        step=1,
        key=session.OBJ_EPOCHS,
        help=f"Default {_defaults_for(*choice)} for {model} under the {recipe} recipe; early stopping on a held-out "
        "part of the training split may end sooner, never before the schedule's final phase.",
    )
    c_seeds.number_input("split seeds", min_value=1, max_value=session.SEEDS_MAX, step=1, key=session.OBJ_SEEDS)
    c_sel.radio(
        "T and λ",
        objectives.SELECTIONS,
        format_func=lambda s: (
            "chosen inside each tuning split (honest; oracle and the paper's protocol beside it)"
            if s == "tuning"
            else "fixed: T = 1, λ = 0.5"
        ),
        horizontal=True,
        key=session.OBJ_SELECTION,
    )
    # every model is trained here (a PyTorch network with its test images): ε can always be searched, by the selection
    epsilons = eps_choice.grid_choice(
        c_eps,
        "ε searched with T and λ",
        key=session.OBJ_EPS_GRID,
        reason=None
        if st.session_state[session.OBJ_SELECTION] == "tuning"
        else "ε is searched by the selection, and here T and λ are fixed",
        compact=True,
    )
    st.caption(f"Recipe {recipe}: {training.PRESETS[recipe].description}.")
    if (note := objectives.left_out_note(dataset)) is not None:
        st.caption(note.replace(" (name one with --outliers, e.g. npz:PATH)", "."))
    else:
        st.caption(f"OpenMix mixes in {objectives.DEFAULT_OUTLIERS[dataset]} images as outliers.")
session.keep(
    [
        session.OBJ_DATASET,
        session.OBJ_MODEL,
        session.OBJ_RECIPE,
        session.OBJ_OBJECTIVES,
        session.OBJ_EPOCHS,
        session.OBJ_SEEDS,
        session.OBJ_SELECTION,
        session.OBJ_EPS_GRID,
    ],
    session.OBJ_KEPT,
)

options = {  # the arguments of objectives_study, and the settings its result is kept for
    "dataset": dataset,
    "model": model,
    "recipe": recipe,
    "objectives": tuple(st.session_state[session.OBJ_OBJECTIVES]),
    "epochs": int(st.session_state[session.OBJ_EPOCHS]),
    "seeds": int(st.session_state[session.OBJ_SEEDS]),
    "tune_fraction": session.shared().tune_fraction,  # the shared tuning fraction (set on the other pages)
    "selection": st.session_state[session.OBJ_SELECTION],
}
if epsilons is not None:  # part of the job's key and of each evaluation's cache key
    options["epsilons"] = epsilons
# The time this choice takes, from throughput measured per network and device; on a CPU a network meant for a
# GPU is named as such before anyone waits hours for it.
# On a CPU the measured throughput is scaled to this machine now: the threads the training gets and the load.
machine = None if gpu else estimate.current_machine()
# the models the study will train: those of the chosen objectives not already in the cache (they are read back)
cached = objectives.cached_objectives(dataset, model, options["objectives"], epochs=options["epochs"], recipe=recipe)
guess = estimate.estimate(
    model, dataset, options["objectives"], options["epochs"], "cuda" if gpu else "cpu", machine=machine, cached=cached
)
if not gpu and (
    warning := estimate.cpu_warning(
        model, dataset, options["objectives"], options["epochs"], machine=machine, cached=cached
    )
):
    st.warning(warning)
result = jobbox.study_run(
    session.OBJECTIVES_PAGE,
    dataset,
    tuple(options.items()),
    f"Training objectives on {dataset} ({model}, {recipe}): {count(len(options['objectives']), 'model')}",
    lambda progress, cancel: objectives.objectives_study(**options, progress=progress, cancel=cancel),
    ready=bool(options["objectives"]),
    hint=f"Models missing from the cache are trained first. {guess.sentence()}",
)
if result is None:
    answer_slot.markdown(
        "The paper's Table 1 asks how the way a classifier was trained changes which detector tells its errors "
        "apart best. Choose a data set, a network and a recipe, then press **Run the study**: the answer appears "
        "here in one sentence."
    )
    st.stop()

answer_slot.markdown(f"**{result.answer()}**")
st.caption(
    f"{result.model} on {result.dataset} · {result.recipe} recipe · epoch cap {result.epochs} · training seed "
    f"{result.train_seed} · {count(len(result.seeds), 'split seed')} · tuning split {result.tune_fraction:.0%} · "
    + (
        "fixed T = 1, λ = 0.5"
        if result.selection != "tuning"
        else "T and λ chosen inside each tuning split"
        if result.epsilons is None
        else f"T, λ and ε chosen inside each tuning split, {protocol.describe_eps_grid(result.epsilons)}"
    )
    + f". {protocol.FPR_CONVENTION}."
)
for note in result.notes:
    st.caption(note.replace(" (name one with --outliers, e.g. npz:PATH)", "."))
st.dataframe(result.summary_table(), hide_index=True)
st.caption(
    "Rel-U − Doctor: the FPR95 difference (lower is better for Rel-U) with its 95 % paired bootstrap interval pooled "
    "over the seeds; the verdict says who is better where the interval excludes 0. FPR95 is given both ways: with "
    "the correct predictions as positives (keep 95 % of them: how many errors slip through?) and with the errors as "
    "positives (catch 95 % of them: how many good predictions are lost?), each with its own interval."
    + (
        " Under selection the interval is conditional on the settings each seed chose: it does not resample the "
        "choice itself. The **oracle** column chooses T and λ on the evaluation split itself, as the paper's tables "
        "were selected: the gap between the two columns is what selection alone gives. The **paper's protocol** "
        "column runs the authors' code's procedure on the same logits (their T grid, their split, FPR95 with the "
        "errors as positives, the mean of each detector's five best setting × seed rows on the evaluation part): "
        "a minimum over rows, so it has no valid interval; the Studies page's paper-protocol study takes the gap "
        "apart rung by rung."
        if result.selection == "tuning"
        else ""
    )
)
st.markdown("**FPR95 by detector** (mean (std) over the split seeds; * the row's lowest)")
st.dataframe(result.fpr_table(), hide_index=True)
reference = result.reference_table()
if not reference.empty:
    st.markdown(paper_table.objectives_heading())
    st.dataframe(reference, hide_index=True)
    for note in sorted({paper_table.images_note(row.run) for row in result.rows if row.run} - {None}):
        st.caption(note)
missing = paper_table.not_recorded(result.dataset, result.model, [row.objective for row in result.rows])
if missing:
    st.caption(missing)
with st.expander("Verdicts in words, AUROC"):
    for line in result.verdicts():
        st.text(line)
    # the two FPR95 conventions answer two questions: both, each with its paired interval
    for line in result.operating_points():
        st.text(line)
    st.dataframe(result.auroc_table(), hide_index=True)

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
    csv_text.frame_csv(result.table()),
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
