"""Streamlit glue shared by the pages of Rel-U Studio: the current run, the sidebar run picker, uploads,
long jobs with progress and cancellation, URL query parameters, and the cached computations of Explore.

Caches are keyed on run ids (content hashes) and plain hyperparameters, never on the big arrays: a run
lives once per process in ``_RUNS`` and every cached function receives its ``run_id``. The Explore
compute path (:func:`explore`) has no widgets in it, so ``bench/bench_app.py`` times exactly what a slider
change runs.
"""

from __future__ import annotations

import hashlib
import math
import re
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from relu_core import detectors, figures, jobs, limits, metrics, preprocessing, protocol, stats, threads
from relu_core.errors import USER_ERRORS, Cancelled, InputError, unexpected, user_message
from relu_core.registry import LRURegistry

# ------------------------------------------------------------------------------------------- constants

#: Temperatures used in the paper's grid; all of them sit on the T slider.
PAPER_TEMPERATURES: tuple[float, ...] = (0.5, 1.0, 1.1, 1.2, 1.5, 2.0, 5.0, 10.0, 100.0, 1000.0)
#: The T slider: ten steps per decade from 0.1 to 1000 (two significant digits) plus the paper's values.
TEMPERATURES: tuple[float, ...] = tuple(
    sorted({float(f"{10 ** (k / 10):.2g}") for k in range(-10, 31)} | set(PAPER_TEMPERATURES))
)
#: Input pre-processing magnitudes (the paper's grid, 0 = no pre-processing).
EPSILONS = preprocessing.PAPER_EPSILONS
#: Detector keys (``detectors.DETECTOR_NAMES``) with their display names, Rel-U and Doctor first.
DETECTOR_LABELS: dict[str, str] = {"relu": "Rel-U", "doctor": "Doctor", "msp": "MSP", "odin": "ODIN",
                                   "entropy": "Entropy", "energy": "Energy"}
DEFAULT_DETECTORS: tuple[str, ...] = ("relu", "doctor")
#: Detectors whose softmax temperature follows the T control; the others keep their standard setting.
TEMPERATURE_SCALED: tuple[str, ...] = ("relu", "doctor")
#: Detectors that input pre-processing (eps > 0) applies to.
PERTURBED: tuple[str, ...] = ("relu", "doctor")
#: Thin ROC / risk-coverage lines to this many points when drawing (metrics use every sample).
CURVE_POINTS = 1500

# ------------------------------------------------------------------------------------------- runs

#: Runs kept for this process (content-addressed, so sessions share them), least recently used dropped.
_RUNS = LRURegistry(limits.MAX_RUNS)


def register_run(run) -> str:
    """Keep ``run`` for this process (runs are content-addressed, so sessions can share them)."""
    _RUNS.setdefault(run.run_id, run)
    return run.run_id


def get_run(run_id: str):
    """The registered run ``run_id`` (InputError when unknown, e.g. dropped from the bounded registry)."""
    try:
        return _RUNS[run_id]
    except KeyError:
        raise InputError(f"this run was dropped from memory (the server keeps the {limits.MAX_RUNS} most recently "
                         "used runs): load it again") from None


def run_label(run) -> str:
    """One line naming a run in the picker."""
    return f"{run.source} · {run.logits.shape[0]:,} samples × {run.logits.shape[1]} classes"


def session_runs() -> list[str]:
    """Run ids loaded in this browser session, oldest first."""
    return st.session_state.setdefault("run_ids", [])


def select_run(run) -> None:
    """Register ``run`` (and record it on disk so that a shared URL can reopen it), add it to this session's
    runs and make it the current one."""
    from relu_core import runs

    if run.run_id not in session_runs():
        try:
            runs.remember(run)
        except OSError:  # a full or read-only cache: the run still works, only its link will not reopen it
            pass
    run_id = register_run(run)
    ids = session_runs()
    if run_id not in ids:
        ids.append(run_id)
        del ids[:-limits.MAX_SESSION_RUNS]
    st.session_state["run_id"] = run_id


def current_run():
    """The run the pages show: the one picked in the sidebar, else the default run (``runs.default_choice``),
    prepared by a background job on first use (it continues when the page is left) and cached on disk."""
    from relu_core import runs

    run_id = st.session_state.get("run_id")
    if run_id in _RUNS:
        return _RUNS[run_id]
    if run_id is not None:
        st.warning(f"The selected run was dropped from memory (the server keeps the {limits.MAX_RUNS} most recently "
                   "used runs): load it again; showing the default run.")
    try:
        choice = runs.default_choice()
    except InputError as exc:
        show_error(exc)
        st.stop()
    job = jobs.MANAGER.submit(f"default:{choice.dataset}", f"Preparing the default run: {choice.description}",
                              _default_run, on_done=_register_if_run)
    wait_for(job)
    if job.state != jobs.DONE:
        show_error(InputError(job.error or "the default run was cancelled; reload the page to prepare it again"))
        jobs.MANAGER.forget(job.key)
        st.stop()
    select_run(job.result)
    return job.result


def _default_run(progress, cancel):
    from relu_core import runs

    return runs.default_run(progress=progress, cancel=cancel)


def _register_if_run(result) -> None:
    if hasattr(result, "run_id"):
        register_run(result)


def wait_for(job: jobs.Job) -> None:
    """Block this script run on ``job`` with a progress bar and a Cancel button, in a box that disappears when
    the job ends. The job itself runs in a worker thread: leaving the page does not stop it."""
    if not job.running:
        return
    box = st.empty()
    with box.container(border=True):
        st.markdown(f"**{job.label}** on {device_name()}")
        bar = st.progress(job.fraction, text=job.message)
        st.button("Cancel", key=f"cancel_{job.key}", on_click=job.cancel)
        st.caption("Runs in the background: it goes on if you leave this page, and the jobs panel in the sidebar "
                   "follows it.")
    while not job.wait(0.25):
        bar.progress(job.fraction, text=job.message)
    box.empty()


def start_job(key: str, label: str, work: Callable[[Callable, Callable], object], *, select: bool = True,
              group: str = "") -> jobs.Job:
    """Start (or join: same ``key``, same job) a background job; a run it returns joins this session's run list
    (and becomes current with ``select``) when it is done, whatever page the session is on then."""
    job = jobs.MANAGER.submit(key, label, work, group=group, on_done=_register_if_run)
    st.session_state.setdefault("pending_jobs", {})[key] = select
    return job


def adopt_finished_jobs() -> None:
    """Runs of this session's finished jobs join its run list; failures and cancellations are reported once."""
    pending: dict[str, bool] = st.session_state.setdefault("pending_jobs", {})
    messages = st.session_state.setdefault("job_messages", [])
    for key, select in list(pending.items()):
        job = jobs.MANAGER.get(key)
        if job is not None and job.running:
            continue
        del pending[key]
        if job is None:
            continue
        if job.state == jobs.DONE and hasattr(job.result, "run_id"):
            register_run(job.result)
            if select:
                select_run(job.result)
            elif job.result.run_id not in session_runs():
                session_runs().append(job.result.run_id)
        elif job.state == jobs.FAILED:
            messages.append(("error", f"{job.label} failed: {job.error}"))
            jobs.MANAGER.forget(key)  # asking again retries
        elif job.state == jobs.CANCELLED:
            messages.append(("warning", f"{job.label}: cancelled; the previous run is still loaded."))


@st.fragment(run_every=1.0)
def _running_jobs_panel() -> None:
    pending = st.session_state.get("pending_jobs", {})
    running = [job for job in jobs.MANAGER.jobs() if job.running]
    if not any(job.key in pending for job in running) and pending:
        st.rerun()  # one of this session's jobs ended: the whole page picks up its run
    for job in running:
        st.progress(job.fraction, text=f"{job.label}: {job.message}")
        st.button("Cancel", key=f"cancel_panel_{job.key}", on_click=job.cancel)


def jobs_panel() -> None:
    """The sidebar's jobs: running ones with progress and Cancel (refreshed every second), then this session's
    failure and cancellation messages (each shown once)."""
    adopt_finished_jobs()
    running = any(job.running for job in jobs.MANAGER.jobs())
    messages = st.session_state.get("job_messages", [])
    if not running and not messages:
        return
    st.subheader("Jobs")
    if running:
        _running_jobs_panel()
    for kind, text in messages:
        (st.error if kind == "error" else st.warning)(text)
    messages.clear()


def _request_cancel() -> None:
    st.session_state["cancel_requested"] = True


def device_name() -> str:
    """The device the engine would compute on (named in the progress box)."""
    try:
        from relu_core import engine

        device = engine.select_device("auto")
    except ImportError:
        return "cpu"
    if device.type == "cuda":
        import torch

        return f"GPU ({torch.cuda.get_device_name(device)})"
    return str(device)


def run_job(label: str, job: Callable[[Callable, Callable], object], *, select: bool = True,
            key: str | None = None):
    """Run ``job(progress, cancel)`` in an ``st.status`` box with a progress bar, the device and a Cancel button.

    Returns the job's result (a run is registered and, with ``select``, made current), or None after a
    user error (``st.error`` with its one-line message) or a cancellation; the previous run stays current
    either way, so nothing already computed is lost.

    With ``key`` (naming the computation and every setting it depends on) the work runs as a background job
    (:func:`start_job`): it goes on when the page is left, :func:`job_result` picks it up on a later visit,
    and a cancellation or failure that happens meanwhile is reported once in the sidebar.
    """
    if key is not None:
        handle = start_job(key, label, job, select=select)
        wait_for(handle)
        return _finished(handle, select)
    st.session_state["cancel_requested"] = False
    with st.status(f"{label} on {device_name()}", expanded=True) as status:
        bar = st.progress(0.0, text="starting")
        st.button("Cancel", on_click=_request_cancel, key=f"cancel_{label}")

        def progress(done: int, total: int, message: str) -> None:
            bar.progress(min(max(done / total, 0.0), 1.0) if total else 0.0, text=message)

        def cancel() -> bool:
            return bool(st.session_state.get("cancel_requested"))

        failure: BaseException | None = None
        try:
            result = job(progress, cancel)
        except (Cancelled, *USER_ERRORS) as exc:
            failure = exc
            outcome = "cancelled" if isinstance(exc, Cancelled) else "failed"
            status.update(label=f"{label}: {outcome}", state="error", expanded=False)
        except Exception as exc:  # noqa: BLE001 - not bad input: show_error logs it with its traceback
            failure = exc
            status.update(label=f"{label}: failed", state="error", expanded=False)
        else:
            status.update(label=f"{label}: done", state="complete", expanded=False)
    # the reason goes under the box, not inside it: a finished status box is collapsed
    if isinstance(failure, Cancelled):
        st.warning("Cancelled; the previous run is still loaded.")
        return None
    if failure is not None:
        show_error(failure, label)
        return None
    if select and hasattr(result, "run_id"):
        select_run(result)
    return result


def _finished(handle: jobs.Job, select: bool = False):
    """The result of an ended job of this session's (None after a failure or a cancellation, said here once);
    a run it returns is made current with ``select``."""
    st.session_state.setdefault("pending_jobs", {}).pop(handle.key, None)
    if handle.state == jobs.DONE:
        if select and hasattr(handle.result, "run_id"):
            select_run(handle.result)
        return handle.result
    if handle.state == jobs.FAILED:
        st.error(handle.error)  # one line: the user's error, or errors.unexpected's with its reference
    else:
        st.warning(f"{handle.label}: cancelled; the previous results are still shown.")
    jobs.MANAGER.forget(handle.key)  # asking again retries
    return None


def job_result(key: str):
    """The result of the background job ``key`` once it has ended (a running one shows its progress box
    until then, e.g. a study started before the page was left); None when there is none or it failed."""
    handle = jobs.MANAGER.get(key)
    if handle is None:
        return None
    wait_for(handle)
    return _finished(handle)


def study_result(page: str, scope, settings, pressed: bool, label: str, work: Callable[[Callable, Callable], object]):
    """A study page's result to show and whether it is for the current ``settings``: ``(result, current)``, or
    ``(None, False)`` when there is none yet.

    ``pressed`` (its Run button) starts ``work`` as a background job keyed by ``page``, ``scope`` (the run, and
    the study where a page has several) and ``settings``; a job for these settings that finished while the page
    was left is picked up. Otherwise the page keeps showing the last result in ``scope``, which is stale when
    the settings changed since. Results are kept per session, least recently used dropped.
    """
    key = f"{page}:{scope}:{settings}"
    result = run_job(label, work, select=False, key=key) if pressed else job_result(key)
    results = st.session_state.setdefault(f"{page}_results", LRURegistry(limits.MAX_SESSION_RUNS))
    last = st.session_state.setdefault(f"{page}_last", {})
    if result is not None:
        results[(scope, settings)] = result
        last[scope] = settings
    shown = settings if (scope, settings) in results else last.get(scope)
    if shown is None or (scope, shown) not in results:
        return None, False
    return results[(scope, shown)], shown == settings


def show_error(exc: BaseException, task: str = "this page") -> None:
    """The one-line message of a user error (no traceback); any other exception is logged on the server with
    its traceback and shown as one line with a short reference (``errors.unexpected``)."""
    if not isinstance(exc, USER_ERRORS):
        st.error(unexpected(exc, task))
        return
    st.error(user_message(exc))


# ------------------------------------------------------------------------------------------- sources


#: Registered data sets -> the models that fit them (input size and channels), best first.
_DATASET_MODELS: dict[str, tuple[str, ...]] = {
    "digits": ("cnn8",),
    "mnist": ("cnn28",),
    "fashion-mnist": ("cnn28",),
    "cifar10": ("resnet20", "resnet32", "resnet44", "resnet56", "cnn32"),
    "cifar10-exact": ("resnet20", "resnet32", "resnet44", "resnet56", "cnn32"),
    "cifar100": ("cnn32",),
    "cifar100-exact": ("cnn32",),
    "svhn": ("cnn32",),
}


def fitting_models(dataset_name: str) -> list[str]:
    """Models that can run on ``dataset_name``: pretrained CIFAR ResNets only when their weights are found,
    small CNNs always (trained on demand by the engine and cached)."""
    from relu_core import models

    names = []
    for name in _DATASET_MODELS.get(dataset_name, ("cnn32",)):
        if name.startswith("cnn") or models.pretrained_weights(name) is not None:
            names.append(name)
    return names


def compute_registered(dataset_name: str, model_name: str, download: bool = False) -> Callable:
    """The job computing (or reading from the engine's cache) the logits of ``model_name`` on a registered set."""

    def job(progress, cancel):
        from relu_core import engine

        return engine.logits_for(model_name, None, dataset_name, progress=progress, cancel=cancel,
                                 download=download)

    return job


def load_upload(kind: str, data: bytes, filename: str, *, model_data: bytes | None = None,
                model_filename: str | None = None, arch: str | None = None, dataset_spec: str | None = None,
                progress=None, cancel=None):
    """Turn uploaded bytes into a run (every malformed file raises an ``InputError`` with one line).

    ``kind="logits"``: ``data`` is an npz / csv / parquet of precomputed logits (``runs.load_logits_upload``).
    ``kind="model"``: ``model_data`` is a TorchScript file or a state dict for the architecture ``arch``
    (which also gives the input size and normalisation); the images come from ``data`` (an image-folder
    zip or an npz with ``x``/``y``), or from the registered data set ``dataset_spec`` when ``data`` is empty.
    The class count is the data set's; the engine reports a model whose output size differs.
    """
    if kind == "logits":
        from relu_core import runs

        if not data:
            raise InputError(f"{filename or 'the upload'} is empty")
        return runs.load_logits_upload(data, filename)
    if kind != "model":
        raise InputError(f"unknown upload kind {kind!r}")
    if not model_data:
        raise InputError("upload a model checkpoint (TorchScript or state dict) first")
    if not arch:
        raise InputError("choose the model's architecture")
    from relu_core import engine

    with tempfile.TemporaryDirectory(prefix="relu_upload_") as tmp:
        suffix = Path(model_filename or "model.pt").suffix.lower() or ".pt"
        model_path = Path(tmp) / f"model{suffix}"
        model_path.write_bytes(model_data)
        if data:
            data_suffix = Path(filename).suffix.lower()
            if data_suffix not in (".zip", ".npz"):
                raise InputError(f"{filename}: a data set upload must be an image-folder .zip or an .npz")
            data_path = Path(tmp) / f"data{data_suffix}"
            data_path.write_bytes(data)
            spec = f"{data_suffix[1:]}:{data_path}"
        elif dataset_spec:
            spec = dataset_spec
        else:
            raise InputError("choose a data set for the model: upload one or pick a registered one")
        return engine.logits_for(arch, model_path, spec, progress=progress, cancel=cancel)


def sidebar_run_picker():
    """The sidebar: the current run (switch between loaded runs) and the ways to add one. Returns the run."""
    run = current_run()
    with st.sidebar:
        jobs_panel()
        st.header("Run")
        ids = [rid for rid in session_runs() if rid in _RUNS]
        if ids:
            # the picker follows the current run (set by a job or another page) before it is drawn
            st.session_state["run_picker"] = st.session_state.get("run_id", ids[0])
            st.selectbox("Current run", ids, format_func=lambda rid: run_label(_RUNS[rid]), key="run_picker",
                         on_change=lambda: st.session_state.update(run_id=st.session_state["run_picker"]))
        _sidebar_registered()
        _sidebar_upload_logits()
        _sidebar_upload_model()
    return _RUNS.get(st.session_state.get("run_id"), run)


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
}


def dataset_label(info) -> str:
    """A data set as the picker lists it: what it is, where the test split comes from, whether it is here."""
    label = _DATASET_LABELS.get(info.name, info.name)
    if info.name == "cifar10" and info.location and "jpeg" in info.location.lower():
        label = "CIFAR-10 (JPEG test set, quality 75: shifted)"
    return label + ("" if info.available else " · not on this machine")


def _sidebar_registered() -> None:
    with st.expander("Data set + model"):
        infos = _dataset_infos()
        if not infos:
            st.caption("No registered data sets are available.")
            return
        by_name = {info.name: info for info in infos}
        name = st.selectbox("Data set", list(by_name), format_func=lambda n: dataset_label(by_name[n]),
                            key="pick_dataset")
        info = by_name[name]
        choices = fitting_models(name)
        model_name = st.selectbox("Model", choices, key="pick_model",
                                  help="CIFAR ResNets appear when their pretrained weights are found; small CNNs "
                                       "are trained on demand and cached.")
        if info.available:
            if st.button("Compute logits", key="compute_registered", disabled=not choices):
                start_job(f"logits:{model_name}:{name}", f"Logits of {model_name} on {name}",
                          compute_registered(name, model_name))
                st.rerun()
        else:
            st.caption(f"{name} is not in the data directories. Downloading needs internet access.")
            if st.button(f"Download {name} and compute", key="download_registered", disabled=not choices):
                start_job(f"logits:{model_name}:{name}:download", f"Downloading {name}, logits of {model_name}",
                          compute_registered(name, model_name, download=True))
                st.rerun()


def _sidebar_upload_logits() -> None:
    with st.expander("Upload logits"):
        st.caption("npz with `logits` and `labels` (optional `class_names`), or csv / parquet with one column "
                   "per class and a `label` column.")
        upload = st.file_uploader("Logits file", type=["npz", "csv", "parquet"], key="upload_logits")
        if upload is not None and st.button("Load logits", key="load_logits"):
            if run_job(f"Loading {upload.name}", lambda p, c: load_upload("logits", upload.getvalue(), upload.name)):
                st.rerun()


def _sidebar_upload_model() -> None:
    from relu_core import models

    with st.expander("Upload model + data set"):
        model_file = st.file_uploader("Checkpoint (TorchScript or state dict)", type=["pt", "pth", "th",
                                                                                    "safetensors"],
                                      key="upload_model")
        arch = st.selectbox("Architecture (for state dicts; gives the input normalisation)", list(models.MODELS),
                            key="upload_arch")
        data_file = st.file_uploader("Data set (image-folder zip or npz with x, y)", type=["zip", "npz"],
                                     key="upload_data")
        infos = [info.name for info in _dataset_infos() if info.available]
        registered = st.selectbox("…or a registered data set", ["(uploaded)", *infos], key="upload_registered")
        if model_file is not None and st.button("Compute logits", key="compute_upload"):
            def job(progress, cancel):
                return load_upload(
                    "model", data_file.getvalue() if data_file else b"", data_file.name if data_file else "",
                    model_data=model_file.getvalue(), model_filename=model_file.name, arch=arch,
                    dataset_spec=None if registered == "(uploaded)" else registered, progress=progress, cancel=cancel)

            digest = hashlib.sha256(model_file.getvalue() + (data_file.getvalue() if data_file else b"")).hexdigest()
            start_job(f"upload:{digest[:16]}:{arch}:{registered}", f"Logits of {model_file.name}", job)
            st.rerun()


# ------------------------------------------------------------------------------------------- query params


def _parse_float(text: str | None, allowed: Sequence[float] | None, low: float, high: float) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or not low <= value <= high:
        return None
    if allowed is not None:
        value = min(allowed, key=lambda a: abs(math.log10(a + 1e-12) - math.log10(value + 1e-12)))
    return value


def init_from_query_params() -> None:
    """Seed the Explore widgets from the URL (``lam``, ``T``, ``eps``, ``tune``, ``seed``) on a session's first
    view; invalid values fall back to the defaults."""
    if st.session_state.get("_query_params_read"):
        return
    st.session_state["_query_params_read"] = True
    params = st.query_params
    lam = params.get("lam")
    if lam == "auto":
        st.session_state["lam_auto"] = True
    elif (value := _parse_float(lam, None, 0.0, 1.0)) is not None:
        st.session_state["lam"], st.session_state["lam_auto"] = round(value, 2), False
    if (value := _parse_float(params.get("T"), TEMPERATURES, 0.1, 1000.0)) is not None:
        st.session_state["temperature"] = value
    if (value := _parse_float(params.get("eps"), None, 0.0, 0.004)) is not None:
        st.session_state["eps"] = min(EPSILONS, key=lambda e: abs(e - value))
    if (value := _parse_float(params.get("tune"), None, 0.05, 0.95)) is not None:
        st.session_state["tune_fraction"] = round(value, 2)
    seed = params.get("seed")
    if seed is not None and seed.isdigit():
        st.session_state["seed"] = int(seed)


def open_run_from_query() -> None:
    """On a session's first view, a URL naming a run (``run``, a run id) makes it current: reopened from this
    machine's record of it (``runs.reopen``: cached logits, so quick) or, when the machine has none, a notice
    naming the run the link needs (``run_name``) shown above the page (:func:`query_run_notice`)."""
    from relu_core import runs

    if st.session_state.get("_query_run_read"):
        return
    st.session_state["_query_run_read"] = True
    run_id, name = st.query_params.get("run"), st.query_params.get("run_name")
    if not run_id or run_id == st.session_state.get("run_id"):
        return
    if run_id in _RUNS:
        select_run(_RUNS[run_id])
        return
    known = runs.describe(run_id) if re.fullmatch(r"[0-9a-f]{16}", run_id) else None
    if known is None:
        st.session_state["_query_run_notice"] = (
            f"This link is for run {run_id[:16]}" + (f" ({name[:200]})" if name else "") + ", which is not on this "
            "machine. Showing the current run instead; to see the linked one, compute or upload the same model and "
            "data set (or logits) here: the run id is a hash of them.")
        return
    job = jobs.MANAGER.submit(f"reopen:{run_id}", f"Reopening the linked run: {known}",
                              lambda progress, cancel: runs.reopen(run_id, progress, cancel), on_done=_register_if_run)
    wait_for(job)
    if job.state == jobs.DONE:
        select_run(job.result)
    else:
        st.session_state["_query_run_notice"] = f"The linked run {run_id} ({known}) could not be reopened: {job.error}"
        jobs.MANAGER.forget(job.key)


def query_run_notice() -> None:
    """The notice of :func:`open_run_from_query`, while the session has not moved to another run."""
    if st.session_state.get("_query_run_notice"):
        st.warning(st.session_state["_query_run_notice"])


def write_query_params(lam: float | str, temperature: float, eps: float, tune_fraction: float, seed: int,
                       run=None) -> None:
    """Keep the view in the URL so it can be shared: the settings and, with ``run``, its id and name."""
    wanted = {"lam": lam if isinstance(lam, str) else f"{lam:g}", "T": f"{temperature:g}", "eps": f"{eps:g}",
              "tune": f"{tune_fraction:g}", "seed": str(seed)}
    if run is not None:
        wanted.update(run=run.run_id, run_name=run.source[:200])
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)


# ------------------------------------------------------------------------------------------- explore compute


@st.cache_resource(max_entries=24, show_spinner=False)
def probs_at(run_id: str, temperature: float) -> np.ndarray:
    """``softmax(logits / T)`` of a run, once per (run, T)."""
    return detectors.softmax(get_run(run_id).logits, temperature)


@st.cache_resource(max_entries=8, show_spinner=False)
def correctness(run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, correct) of a run."""
    run = get_run(run_id)
    return np.argmax(run.logits, axis=1), protocol.correctness(run.logits, run.labels)


@st.cache_resource(max_entries=32, show_spinner=False)
def split_for(run_id: str, tune_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(tune_idx, eval_idx), stratified by correctness as in ``protocol.evaluate``."""
    _, correct = correctness(run_id)
    return protocol.split_indices(len(correct), tune_fraction, seed, stratify=correct)


@st.cache_resource(max_entries=64, show_spinner=False)
def fixed_scores(run_id: str, key: str) -> np.ndarray:
    """Uncertainty of a training-free detector at its standard setting, on every sample of the run."""
    run = get_run(run_id)
    detector = detectors.make_detector(key)
    if not detector.accepts_probs:
        return detector.score(run.logits)
    return detector.score_probs(probs_at(run_id, detector.temperature))


@st.cache_resource(max_entries=32, show_spinner=False)
def confusion_figure(run_id: str, tune_fraction: float, seed: int):
    """The tuning split's confusion matrix and its figure (independent of T and lambda: built once)."""
    run = get_run(run_id)
    predictions, _ = correctness(run_id)
    tune_idx, _ = split_for(run_id, tune_fraction, seed)
    cm = metrics.confusion_matrix(predictions[tune_idx], run.labels[tune_idx], len(run.class_names))
    return cm, figures.confusion_heatmap(cm, run.class_names, title="Confusion matrix (tuning split)")


@dataclass
class DetectorView:
    """One detector on a view: uncertainty on every sample and on the evaluation split, curves, metrics."""

    name: str
    uncertainty: np.ndarray  # all samples (the evaluation split's may be replaced by perturbed scores)
    eval_uncertainty: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    summary: dict[str, float]


@dataclass
class ExploreView:
    """Everything the Explore panels show for one setting of (run, T, lambda, split, detectors, eps)."""

    run_id: str
    tune_idx: np.ndarray
    eval_idx: np.ndarray
    predictions: np.ndarray
    correct: np.ndarray
    dstar: np.ndarray
    lam_used: float
    fallback: bool
    accuracy_eval: float
    detectors: dict[str, DetectorView] = field(default_factory=dict)
    #: Rel-U − Doctor on the evaluation split with its paired bootstrap interval, per metric.
    paired: dict[str, stats.PairedDifference] = field(default_factory=dict)


@threads.small_work
def explore(run_id: str, temperature: float, lam: float | str, tune_fraction: float, seed: int,
            keys: Sequence[str], perturbed: dict[str, np.ndarray] | None = None,
            eval_subset: np.ndarray | None = None) -> ExploreView:
    """The compute path of one Explore setting: Rel-U fit on the tuning split at T, every detector scored,
    ROC / risk-coverage curves and metrics on the evaluation split.

    Rel-U and Doctor are always computed (the D* panel and the Rel-U-vs-Doctor gallery need them); the
    training-free baselines come from a per-run cache. ``perturbed`` maps detector keys to their
    evaluation-split uncertainty under input pre-processing, replacing the clean one; with ``eval_subset`` (a
    subsample of the evaluation split, as :func:`eps_subsample`) every detector is evaluated on it only.
    ``paired`` is left empty: :func:`paired_for` or :func:`paired_job` computes it.
    """
    get_run(run_id)  # one line (InputError) when the run was dropped from the bounded registry
    predictions, correct = correctness(run_id)
    tune_idx, eval_idx = split_for(run_id, tune_fraction, seed)
    if eval_subset is not None:
        eval_idx = eval_subset
    probs = probs_at(run_id, temperature)
    relu = detectors.RelU(lam=lam, temperature=temperature).fit_probs(probs[tune_idx], correct[tune_idx])
    scores = {"relu": relu.score_probs(probs), "doctor": detectors.Doctor(temperature).score_probs(probs)}
    for key in keys:
        if key not in scores:
            scores[key] = fixed_scores(run_id, key)
    correct_eval = correct[eval_idx]
    view = ExploreView(run_id, tune_idx, eval_idx, predictions, correct, relu.matrix_, float(relu.lam_),
                       bool(relu.fallback_), float(correct_eval.mean()))
    for key in dict.fromkeys([*keys, "relu", "doctor"]):
        uncertainty = scores[key]
        eval_u = perturbed[key] if perturbed and key in perturbed else uncertainty[eval_idx]
        fpr, tpr, _ = metrics.roc_curve(eval_u, correct_eval)
        coverage, risk = metrics.risk_coverage_curve(eval_u, correct_eval)
        view.detectors[key] = DetectorView(DETECTOR_LABELS[key], uncertainty, eval_u, fpr, tpr, coverage, risk,
                                           metrics.summary(eval_u, correct_eval))
    return view


def paired_for(view: ExploreView, seed: int) -> dict[str, stats.PairedDifference]:
    """Rel-U − Doctor on the view's evaluation split with its paired bootstrap interval (1,000 resamples
    seeded with the split seed; about 100 ms at 10k samples, so Explore runs it as :func:`paired_job`)."""
    return stats.paired_bootstrap(view.detectors["relu"].eval_uncertainty, view.detectors["doctor"].eval_uncertainty,
                                  view.correct[view.eval_idx], seed=seed)


def paired_job(view: ExploreView, seed: int) -> jobs.Job:
    """:func:`paired_for` as a background job, so that a slider never waits on the bootstrap. Keyed by the
    content it depends on (both detectors' evaluation scores, the correctness, the seed): a setting seen
    again, in any session, reuses its result."""
    digest = hashlib.blake2b(digest_size=16)
    for array in (view.detectors["relu"].eval_uncertainty, view.detectors["doctor"].eval_uncertainty,
                  view.correct[view.eval_idx], np.int64(seed)):
        digest.update(np.ascontiguousarray(array).tobytes())
    return jobs.MANAGER.submit(f"paired:{digest.hexdigest()}", "Rel-U − Doctor paired bootstrap",
                               lambda progress, cancel: paired_for(view, seed))


#: The default settings the Start page's verdict uses (Explore opens on the same ones).
START_SETTINGS = {"temperature": 1.0, "lam": 0.5, "tune_fraction": 0.5, "seed": 0}


def start_view(run_id: str) -> ExploreView:
    """Rel-U and Doctor on ``run_id`` at :data:`START_SETTINGS`, with their paired interval."""
    s = START_SETTINGS
    view = explore(run_id, s["temperature"], s["lam"], s["tune_fraction"], s["seed"], list(DEFAULT_DETECTORS))
    view.paired = paired_for(view, s["seed"])
    return view


def start_verdict(view: ExploreView) -> str:
    """One line: Rel-U vs Doctor on the evaluation split (AUROC and FPR95, each with its paired 95 % interval,
    "no significant difference" where it covers 0)."""
    s = START_SETTINGS
    settings = f"T = {s['temperature']:g}, λ = {s['lam']:g}, {s['tune_fraction']:.0%} tuning split, seed {s['seed']}"
    n_errors = int((~view.correct[view.eval_idx]).sum())
    return (f"Rel-U vs Doctor at the default settings ({settings}; {view.eval_idx.size:,} evaluation samples, "
            f"{n_errors:,} errors): " + "; ".join(view.paired[m].verdict() for m in ("auroc", "fpr95")) + ".")


#: On CPU an ε pass first scores this many evaluation images (shown at once), then the whole split.
EPS_SUBSAMPLE = 1000


def eps_subsample(run_id: str, tune_fraction: float, seed: int) -> np.ndarray | None:
    """The evaluation-split subsample an ε pass computes first on CPU (seeded, sorted), or None (a GPU, or an
    evaluation split of at most :data:`EPS_SUBSAMPLE` samples: the whole split at once)."""
    _, eval_idx = split_for(run_id, tune_fraction, seed)
    if eval_idx.size <= EPS_SUBSAMPLE or device_name().startswith("GPU"):
        return None
    return np.sort(np.random.default_rng(seed).choice(eval_idx, EPS_SUBSAMPLE, replace=False))


def perturbed_scores(run_id: str, temperature: float, lam: float | str, tune_fraction: float, seed: int,
                     eps: float, *, indices: np.ndarray | None = None, progress=None,
                     cancel=None) -> dict[str, np.ndarray]:
    """Uncertainty of Rel-U and Doctor on inputs pre-processed with magnitude ``eps``, on the evaluation split
    (or on ``indices``) (``preprocessing.perturbed_scores``; the engine caches it on disk). Rel-U is fitted on
    the clean tuning split, as in the paper."""
    run = get_run(run_id)
    if run.model is None or run.images is None:
        raise InputError("input pre-processing needs the model and the images; this run has logits only")
    _, correct = correctness(run_id)
    tune_idx, eval_idx = split_for(run_id, tune_fraction, seed)
    probs = probs_at(run_id, temperature)
    fitted = {"relu": detectors.RelU(lam=lam, temperature=temperature).fit_probs(probs[tune_idx], correct[tune_idx]),
              "doctor": detectors.Doctor(temperature)}
    return {key: np.asarray(preprocessing.perturbed_scores(run.model, run.images, detector, eps, mean=run.mean,
                                                           std=run.std, indices=eval_idx if indices is None
                                                           else indices, progress=progress,
                                                           cancel=cancel), dtype=np.float64)
            for key, detector in fitted.items()}


def eps_job(run_id: str, temperature: float, lam: float | str, tune_fraction: float, seed: int, eps: float,
            subset: np.ndarray | None) -> jobs.Job:
    """The background ε pass of one setting (on ``subset``, or on the whole evaluation split when None).

    Jobs are shared by every session asking for the same setting; a new setting asked by this session cancels
    its previous ε passes (only the last value is computed)."""
    part = "all" if subset is None else f"sub{subset.size}"
    key = f"eps:{run_id}:{temperature:g}:{lam}:{tune_fraction:g}:{seed}:{eps:g}:{part}"
    group = f"eps:{st.session_state.setdefault('_session_key', uuid.uuid4().hex)}:{part}"
    what = "the whole evaluation split" if subset is None else f"{subset.size:,} evaluation images"
    return jobs.MANAGER.submit(
        key, f"Input pre-processing ε = {eps:g} on {what}",
        lambda progress, cancel: perturbed_scores(run_id, temperature, lam, tune_fraction, seed, eps,
                                                  indices=subset, progress=progress, cancel=cancel),
        group=group)


def view_figures(view: ExploreView, class_names: Sequence[str], points: dict[str, metrics.OperatingPoint] | None = None,
                 show_keys: Sequence[str] | None = None):
    """(D* heatmap, ROC figure, risk-coverage figure) of a view, operating points marked."""
    keys = list(show_keys) if show_keys is not None else list(view.detectors)
    shown = {k: view.detectors[k] for k in keys}
    points = points or {}
    roc = figures.roc_figure(
        {d.name: (d.fpr, d.tpr, d.summary["auroc"]) for d in shown.values()},
        {view.detectors[k].name: (p.fpr, p.tpr) for k, p in points.items() if k in shown},
        max_points=CURVE_POINTS, title="ROC on the evaluation split (positives = correct predictions)",
    )
    rc = figures.risk_coverage_figure(
        {d.name: (d.coverage, d.risk, d.summary["aurc"]) for d in shown.values()},
        {view.detectors[k].name: (p.coverage, p.risk) for k, p in points.items() if k in shown},
        max_points=CURVE_POINTS, title="Risk-coverage on the evaluation split",
    )
    heat = figures.dstar_heatmap(view.dstar, class_names, title=f"D* (Rel-U, λ = {view.lam_used:.3g})")
    return heat, roc, rc


# ------------------------------------------------------------------------------------------- display helpers


def paired_rows(paired: dict[str, stats.PairedDifference]) -> pd.DataFrame:
    """One row per metric: the difference Rel-U − Doctor, its 95 % interval and the verdict in words."""
    return pd.DataFrame(
        [{"metric": stats.METRIC_LABELS[m], "Rel-U − Doctor": f"{d.estimate:+.4f}",
          "95 % CI (paired bootstrap)": f"{d.low:+.4f} to {d.high:+.4f}",
          "verdict": d.verdict().split(": ", 1)[1]} for m, d in paired.items()]
    )


def paired_table(frame: pd.DataFrame) -> pd.DataFrame:
    """``robustness.RobustnessResult.paired`` in words: corruption, metric, mean ± std over seeds, interval,
    verdict."""
    return pd.DataFrame({
        "corruption": frame["corruption"],
        "metric": [stats.METRIC_LABELS[m] for m in frame["metric"]],
        "Rel-U − Doctor (mean ± std over seeds)": [f"{m:+.4f} ± {s:.4f}" for m, s in zip(frame["mean"], frame["std"])],
        "95 % CI of the mean": [f"{lo:+.4f} to {hi:+.4f}" for lo, hi in zip(frame["ci_low"], frame["ci_high"])],
        "verdict": [v.split(": ", 1)[1] for v in frame["verdict"]],
    })


def readable_hyperparameters(frame: pd.DataFrame) -> pd.DataFrame:
    """The selected hyperparameters with readable headers: T, λ (– where none), the fallback in words."""
    return pd.DataFrame({
        "seed": frame["seed"],
        "detector": frame["detector"],
        "T": [f"{t:g}" for t in frame["temperature"]],
        "λ": ["–" if lam is None or pd.isna(lam) else f"{lam:g}" for lam in frame["lam"]],
        "D*": [protocol.FALLBACK_LABEL if f else ("learned" if d == "Rel-U" else "–")
               for f, d in zip(frame["hamming_fallback"], frame["detector"])],
        "settings searched": frame["settings_searched"],
    })


def thumbnail(image: np.ndarray, size: int = 72) -> np.ndarray:
    """An uint8 (H, W, C) image scaled up (nearest neighbour) so that tiny images stay visible."""
    image = image[..., 0] if image.shape[-1] == 1 else image
    factor = max(1, size // max(image.shape[:2]))
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)
