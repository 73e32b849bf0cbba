"""The sidebar every page draws (:func:`sidebar_run_picker`): the current run and the run picker, the jobs
panel, a registered data set + model, and uploads (logits, or a model with a data set) turned into runs from
their bytes (:func:`load_upload`) by background jobs."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from relu_core import cache, jobs, limits, models, onnx_model, protocol, runs
from relu_core.errors import InputError
from studio import session
from studio.jobbox import jobs_panel, placed_messages, show_error, start_job, wait_for
from studio.runs import register_if_run, run_label, select_run, session_runs


def current_run(page_title: str = "Start"):
    """The run the pages show: the one picked in the sidebar, else the default run (``runs.default_choice``),
    prepared by a background job on first use (it continues when the page is left) and cached on disk; while it
    is prepared, the page titled ``page_title`` says what it will then show."""
    run_id = st.session_state.get(session.RUN_ID)
    if run_id in runs.RUNS:
        return runs.RUNS[run_id]
    if run_id is not None:
        st.warning(
            f"The selected run was dropped from memory (the server keeps the {limits.MAX_RUNS} most recently "
            "used runs): load it again; showing the default run."
        )
    try:
        choice = runs.default_choice()
    except InputError as exc:
        show_error(exc)
        st.stop()
    job = jobs.MANAGER.submit(
        f"default:{choice.dataset}",
        f"Preparing the default run: {choice.description}",
        _default_run,
        on_done=register_if_run,
    )
    skeleton = st.empty()
    if job.running:  # the first visit: say what is being prepared and what the page will show
        with skeleton.container():
            if page_title == "Start":
                st.markdown("### Rel-U Studio: when should a prediction not be trusted?")
            st.info(preparing_message(choice.description, page_title))
    wait_for(job)
    skeleton.empty()
    if job.state != jobs.DONE:
        show_error(InputError(job.error or "the default run was cancelled; reload the page to prepare it again"))
        jobs.MANAGER.forget(job.key)
        st.stop()
    select_run(job.result)
    return job.result


def preparing_message(description: str, page_title: str) -> str:
    """What a first visit says while the default run (``description``) is prepared, on the page titled
    ``page_title``: Start describes what it will show; another page only that it opens next."""
    then = (
        "Then this page shows, in plain words, what Rel-U and Doctor do with an example from the run's images; a "
        "scorecard of Rel-U against Doctor in each setting the run supports; and Rel-U's matrix D* beside the "
        "model's confusion matrix."
        if page_title == "Start"
        else f"Then the {page_title} page opens on it."
    )
    return (
        f"Preparing the default run ({description}); a first visit trains or loads it once, then it is cached. {then}"
    )


def _default_run(progress, cancel):
    return runs.default_run(progress=progress, cancel=cancel)


def compute_registered(dataset_name: str, model_name: str, download: bool = False) -> Callable:
    """The job computing (or reading from the engine's cache) the logits of ``model_name`` on a registered set."""

    def job(progress, cancel):
        return runs.logits_for(model_name, None, dataset_name, progress=progress, cancel=cancel, download=download)

    return job


def load_upload(
    kind: str,
    data: bytes,
    filename: str,
    *,
    model_data: bytes | None = None,
    model_filename: str | None = None,
    arch: str | None = None,
    dataset_spec: str | None = None,
    progress=None,
    cancel=None,
):
    """Turn uploaded bytes into a run (every malformed file raises an ``InputError`` with one line, and so does
    a run the app cannot evaluate: fewer than two right or two wrong predictions, ``protocol.check_evaluable``;
    the job fails, so it never replaces the current run).

    ``kind="logits"``: ``data`` is an npz / csv / parquet of precomputed logits (``runs.load_logits_upload``).
    ``kind="model"``: ``model_data`` is a TorchScript file or a state dict for the architecture ``arch``
    (which also gives the input size and normalisation), or an ONNX classifier (``*.onnx``, run by onnxruntime:
    ``runs.onnx_run``, ``arch`` unused, no ε); the images come from ``data`` (an image-folder
    zip or an npz with ``x``/``y``, read from its bytes by ``datasets.load_uploaded_dataset``), or from the
    registered data set ``dataset_spec`` when ``data`` is empty.
    The class count is the data set's; the engine reports a model whose output size differs.
    """
    if kind == "logits":
        if not data:
            raise InputError(f"{filename or 'the upload'} is empty")
        return _evaluable(runs.load_logits_upload(data, filename))
    if kind != "model":
        raise InputError(f"unknown upload kind {kind!r}")
    if not model_data:
        raise InputError(
            f"{model_filename} is empty (0 bytes): upload the checkpoint again"
            if model_filename
            else "upload a model checkpoint (TorchScript or state dict) first"
        )
    name = model_filename or "model.pt"
    onnx = onnx_model.is_onnx(name)
    if not arch and not onnx:
        raise InputError("choose the model's architecture")
    from relu_core import datasets

    if data:  # straight from the bytes: no file, no path to parse
        images = datasets.load_uploaded_dataset(data, filename, progress=progress)
    elif dataset_spec:
        images = dataset_spec
    elif filename:
        raise InputError(f"{filename} is empty (0 bytes): upload the data set again or pick a registered one")
    else:
        raise InputError("choose a data set for the model: upload one or pick a registered one")
    if onnx:
        return _evaluable(runs.onnx_run(model_data, images, weights_name=name, progress=progress, cancel=cancel))
    # the checkpoint is read from its bytes too: TorchScript or a state dict, told apart by its content and by
    # the suffix of its name (none: a torch.save file)
    return _evaluable(
        runs.logits_for(
            arch,
            model_data,
            images,
            weights_name=name if Path(name).suffix else f"{name}.pt",
            progress=progress,
            cancel=cancel,
        )
    )


def _evaluable(run):
    """``run``, once ``protocol.check_evaluable`` accepts its predictions (the message names the file's source)."""
    try:
        protocol.check_evaluable(protocol.correctness(run.logits, run.labels))
    except InputError as exc:
        raise InputError(f"{run.source}: {exc}") from None
    return run


@functools.cache
def _freeze_startup_heap() -> None:
    """Moves the objects alive after the first page's imports (torch, plotly, pandas: about half a million) out
    of the garbage collector's reach, once per server process. A full collection over them takes ~0.2 s with
    the GIL held, which stalls the messages of the rerun that triggers it; they are never freed anyway.
    (Streamlit's collection after every rerun is off too: ``runner.postScriptGC`` in .streamlit/config.toml.)"""
    gc.collect()
    gc.freeze()


def sidebar_run_picker(page_title: str = "Start"):
    """The sidebar: the current run (switch between loaded runs) and the ways to add one, drawn around the page
    titled ``page_title``. Returns the run."""
    _freeze_startup_heap()
    run = current_run(page_title)
    with st.sidebar:
        jobs_panel()
        st.header("Run")
        ids = [rid for rid in session_runs() if rid in runs.RUNS]
        if ids:
            # the picker follows the current run (set by a job or another page) before it is drawn
            st.session_state[session.RUN_PICKER] = st.session_state.get(session.RUN_ID, ids[0])
            st.selectbox(
                "Current run",
                ids,
                format_func=lambda rid: run_label(runs.RUNS[rid]),
                key=session.RUN_PICKER,
                on_change=lambda: st.session_state.update({session.RUN_ID: st.session_state[session.RUN_PICKER]}),
            )
        _sidebar_registered(run)
        _sidebar_upload_logits()
        _sidebar_upload_model()
    return runs.RUNS.get(st.session_state.get(session.RUN_ID), run)


#: The sidebar's forms, where the failures of the jobs they start are said (``jobbox.start_job(place=)``).
REGISTERED, UPLOAD_LOGITS, UPLOAD_MODEL = "registered", "upload_logits", "upload_model"


def _dataset_infos():
    try:
        from relu_core import datasets

        return list(datasets.list_datasets())
    except (ImportError, AttributeError):
        return []


#: What each registered data set is, in the words of the picker (the test split the logits are computed on).
_DATASET_LABELS: dict[str, str] = {
    "digits": "digits (scikit-learn 8×8, 899 test images)",
    "mnist": "MNIST (10,000 test images)",
    "fashion-mnist": "Fashion-MNIST (10,000 test images)",
    "cifar10": "CIFAR-10 (10,000 test images)",
    "cifar10-exact": "CIFAR-10 exact (first 1,017 test images)",
    "cifar100": "CIFAR-100 (10,000 test images)",
    "cifar100-exact": "CIFAR-100 exact (first 916 test images)",
    "svhn": "SVHN (26,032 test images)",
    "dead-leaves": "dead leaves (generated: OpenMix's outliers, no model classifies them)",
}


def dataset_label(info) -> str:
    """A data set as the picker lists it: what it is, where the test split comes from, whether it is here."""
    label = _DATASET_LABELS.get(info.name, info.name)
    if info.name == "cifar10" and info.location and "jpeg" in info.location.lower():
        label = "CIFAR-10 (JPEG test set, quality 75: shifted)"
    return label + ("" if info.available else " · not on this machine")


def _sidebar_registered(run) -> None:
    with st.expander("Data set + model", key=session.EXPAND_REGISTERED):
        infos = _dataset_infos()
        if not infos:
            st.caption("No registered data sets are available.")
            return
        by_name = {info.name: info for info in infos}
        recipe = dict(run.recipe) if run is not None else {}
        if recipe.get("dataset_spec") in by_name:  # open on the current run's data set and model, not the first
            st.session_state.setdefault(session.PICK_DATASET, recipe["dataset_spec"])
            if recipe.get("model_name") in models.fitting_models(recipe["dataset_spec"]):
                st.session_state.setdefault(session.PICK_MODEL, recipe["model_name"])
        name = st.selectbox(
            "Data set", list(by_name), format_func=lambda n: dataset_label(by_name[n]), key=session.PICK_DATASET
        )
        info = by_name[name]
        choices = models.fitting_models(name)
        model_name = st.selectbox(
            "Model",
            choices,
            key=session.PICK_MODEL,
            help="CIFAR ResNets appear when their pretrained weights are found; small CNNs "
            "are trained on demand and cached.",
        )
        if info.available:
            if st.button("Compute logits", key=session.PICK_COMPUTE, disabled=not choices):
                start_job(
                    f"logits:{model_name}:{name}",
                    f"Logits of {model_name} on {name}",
                    compute_registered(name, model_name),
                    place=REGISTERED,
                )
                st.rerun()
        else:
            st.caption(f"{name} is not in the data directories. Downloading needs internet access.")
            if st.button(f"Download {name} and compute", key=session.PICK_DOWNLOAD, disabled=not choices):
                start_job(
                    f"logits:{model_name}:{name}:download",
                    f"Downloading {name}, logits of {model_name}",
                    compute_registered(name, model_name, download=True),
                    place=REGISTERED,
                )
                st.rerun()
        placed_messages(REGISTERED)  # a failure is said here, beside the button that started it


def _sidebar_upload_logits() -> None:
    with st.expander("Upload logits", key=session.EXPAND_UPLOAD_LOGITS):
        st.caption(
            "npz with `logits` and `labels` (optional `class_names`), or csv / parquet with one column "
            "per class and a `label` column."
        )
        upload = st.file_uploader("Logits file", type=["npz", "csv", "parquet"], key=session.UPLOAD_LOGITS)
        if upload is not None and st.button("Load logits", key=session.UPLOAD_LOGITS_LOAD):
            data, name = upload.getvalue(), upload.name  # a background job: it goes on when the page is left
            start_job(
                f"upload-logits:{cache.bytes_digest(data)[:16]}:{name}",
                f"Loading {name}",
                lambda progress, cancel: load_upload("logits", data, name),
                place=UPLOAD_LOGITS,
            )
            st.rerun()
        placed_messages(UPLOAD_LOGITS)  # a failure is said here, under the file the user loaded


def _guess_architecture(model_file) -> list[str]:
    """The architectures an uploaded state dict fits (``models.architectures_for``, read once per file); a new
    file preselects the first of them in the picker, which the user can still change."""
    if model_file is None:
        return []
    held = st.session_state.get(session.UPLOAD_ARCH_GUESS)
    if held is None or held[0] != model_file.file_id:  # Streamlit's id of this upload: no hashing on each rerun
        held = (model_file.file_id, models.architectures_for(model_file.getvalue(), model_file.name))
        st.session_state[session.UPLOAD_ARCH_GUESS] = held
        if held[1]:
            st.session_state[session.UPLOAD_ARCH] = held[1][0]
    return held[1]


def _sidebar_upload_model() -> None:
    with st.expander("Upload model + data set", key=session.EXPAND_UPLOAD_MODEL):
        model_file = st.file_uploader(
            "Checkpoint (TorchScript, state dict or ONNX)",
            type=["pt", "pth", "th", "safetensors", "onnx"],
            key=session.UPLOAD_MODEL,
        )
        onnx = model_file is not None and onnx_model.is_onnx(model_file.name)
        fitting = [] if onnx else _guess_architecture(model_file)
        arch = st.selectbox(
            "Architecture (for state dicts; gives the input normalisation)",
            list(models.MODELS),
            key=session.UPLOAD_ARCH,
            disabled=onnx,
        )
        if fitting:
            st.caption(f"The weights fit {' or '.join(fitting)}.")
        if onnx:
            st.caption(
                "ONNX: run by onnxruntime, its input shape from the file, its normalisation from the file's "
                f"`mean`/`std` metadata, else the data set's. {onnx_model.NO_EPS}."
            )
        data_file = st.file_uploader(
            "Data set (image-folder zip or npz with x, y)", type=["zip", "npz"], key=session.UPLOAD_DATA
        )
        infos = [info.name for info in _dataset_infos() if info.available]
        registered = st.selectbox("…or a registered data set", ["(uploaded)", *infos], key=session.UPLOAD_REGISTERED)
        if model_file is not None and st.button("Compute logits", key=session.UPLOAD_COMPUTE):

            def job(progress, cancel):
                return load_upload(
                    "model",
                    data_file.getvalue() if data_file else b"",
                    data_file.name if data_file else "",
                    model_data=model_file.getvalue(),
                    model_filename=model_file.name,
                    arch=arch,
                    dataset_spec=None if registered == "(uploaded)" else registered,
                    progress=progress,
                    cancel=cancel,
                )

            digest = cache.bytes_digest(model_file.getvalue(), data_file.getvalue() if data_file else b"")
            start_job(
                f"upload:{digest[:16]}:{arch}:{registered}", f"Logits of {model_file.name}", job, place=UPLOAD_MODEL
            )
            st.rerun()
        placed_messages(UPLOAD_MODEL)  # a failure is said here, under the files the user uploaded
