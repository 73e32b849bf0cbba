"""The ε grid a page's honest selection searches, chosen where selection is offered for a run with a model: the
Studies page's ladder (``paper-protocol``, ε from rung 3 on) and the Training objectives page (each trained model).

Three choices, as the command line's ``--eps-grid``: none (ε = 0, logits only; the default), the CPU subset
(``preprocessing.CPU_EPSILONS``) and the authors' whole grid (``protocol.AUTHORS_EPSILONS``). The grid chosen is
one of the library call's arguments, so it is part of the study's job key and cache key: the result shown is the
one computed for the choice. Where ε cannot be searched (a run of logits only, an ONNX model: no gradients) the
control is one line saying why, and the call gets no grid.
"""

from __future__ import annotations

from relu_core import onnx_model, preprocessing, protocol

#: The choices, in the order the control offers them: name -> the grid (None: ε = 0, nothing perturbed).
GRIDS: dict[str, tuple[float, ...] | None] = {
    "none": None,
    "cpu": preprocessing.CPU_EPSILONS,
    "authors": protocol.AUTHORS_EPSILONS,
}
#: What each choice reads as on the page.
LABELS = {
    "none": "none: ε = 0, logits only (default)",
    "cpu": "the CPU subset: " + ", ".join(f"{e:g}" for e in preprocessing.CPU_EPSILONS),
    "authors": "the authors' whole grid: 0, 0.0005, …, 0.004",
}
#: The same choices in a narrow column (the Training objectives page's row of settings): the values in the help.
SHORT_LABELS = {"none": "none (ε = 0)", "cpu": "CPU subset", "authors": "authors' grid"}
#: Why a run of logits only offers no ε.
NO_MODEL = "A logits file cannot be perturbed (ε needs the run's model and its images)"


def why_not(run) -> str | None:
    """Why ε cannot be searched on ``run`` (one sentence), None when it can (its model and images are here)."""
    if run.model is not None and run.images is not None:
        return None
    if run.onnx_file:
        return onnx_model.NO_EPS
    return NO_MODEL


def cost_text(grid: tuple[float, ...] | None, gpu: bool) -> str:
    """What the grid costs, in words: a forward pass per ε > 0 and per seed × fold × setting; hours for the
    authors' grid on CIFAR-10 on 2 CPU cores."""
    if grid is None:
        return "ε = 0: no image is perturbed, the selection reads the logits only."
    positive, authors, cpu = (sum(e > 0 for e in g) for g in (grid, protocol.AUTHORS_EPSILONS, GRIDS["cpu"]))
    where = (
        "This machine computes on a GPU, where the authors' grid belongs (on 2 CPU cores it takes hours on CIFAR-10)."
        if gpu
        else "This machine computes on its CPU: on 2 CPU cores the authors' grid on CIFAR-10 takes hours, so use a "
        f"GPU for it (the CPU subset has {cpu} of its {authors} positive ε; measured on 2 quiet cores, that subset at "
        "two T values and one λ took about 3 minutes a seed on all 10,000 ResNet-56 images: bench/bench_eps_selection.py)."
    )
    return (
        f"{protocol.describe_eps_grid(grid)}. Each ε > 0 is one more forward pass of the images per seed × fold × "
        f"setting (after one backward pass per fitted detector): {positive} here, {authors} for the authors' grid. "
        + where
    )


def grid_choice(
    place, label: str, *, key: str, reason: str | None = None, compact: bool = False
) -> tuple[float, ...] | None:
    """The ε-grid control in ``place`` (``st`` or a container) under ``label``, with its cost in words below it
    (``compact``: short labels, and the values and the cost in the control's help, for a narrow column where a
    caption would push the page's button below a 1280 × 720 viewport); returns the chosen grid (None: ε = 0). With
    ``reason`` (why ε cannot be searched here, :func:`why_not`) there is no control, one line saying why, and
    None."""
    if reason is not None:
        place.caption(f"{label}: none (ε = 0). {reason}.")
        return None
    if not compact:
        choice = place.radio(label, list(GRIDS), format_func=LABELS.get, horizontal=True, key=key)
        place.caption(cost_text(GRIDS.get(choice), _gpu()))
        return GRIDS.get(choice)
    import streamlit as st

    chosen = GRIDS.get(st.session_state.get(key, "none"))  # the choice this rerun draws (its widget's value)
    help_text = "; ".join(LABELS[name] for name in GRIDS) + ". " + cost_text(chosen, _gpu())
    choice = place.radio(label, list(GRIDS), format_func=SHORT_LABELS.get, horizontal=True, key=key, help=help_text)
    return GRIDS.get(choice)


def _gpu() -> bool:
    from relu_core import engine

    return engine.select_device("auto").type == "cuda"
