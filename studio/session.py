"""Every session-state key of the dashboard, declared in one place, with the defaults the pages start from.

Widget keys are session-state keys too. Each page prefixes its own (widgets, defaults, results) so that two
pages never share a key by accident: Start ``start_``, Explore ``ex_`` (its URL parameters keep their short
names: ``studio.query`` maps them), Corruptions ``rob_``, Studies ``study_``, Baselines ``bl_``; the sidebar
``pick_`` (a registered data set + model) and ``upload_`` (uploads), the job boxes ``cancel_``. A key made per item (a chart,
a job) is a prefix declared here joined to the item (:func:`item_key`). The pages and the glue name keys only
through this module (``tests/test_session_keys.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from relu_core import baselines, corruptions, explore, protocol, robustness, runs, scorecard

# ---- runs (studio.runs, studio.sidebar)
#: The current run's id.
RUN_ID = "run_id"
#: The run ids loaded in this session, oldest first.
RUN_IDS = "run_ids"
#: The sidebar's run picker (follows ``RUN_ID``).
RUN_PICKER = "run_picker"
#: The pages declared in app.py, by name (``studio.frame``: switching pages by page object).
PAGES = "_pages"

# ---- sidebar (studio.sidebar): a registered data set + model, uploads
#: The sidebar's expanders (keyed: a message appearing above one must not remount it closed).
EXPAND_REGISTERED = "expand_registered"
EXPAND_UPLOAD_LOGITS = "expand_upload_logits"
EXPAND_UPLOAD_MODEL = "expand_upload_model"
PICK_DATASET = "pick_dataset"
PICK_MODEL = "pick_model"
PICK_COMPUTE = "pick_compute"
PICK_DOWNLOAD = "pick_download"
UPLOAD_LOGITS = "upload_logits"
UPLOAD_LOGITS_LOAD = "upload_logits_load"
UPLOAD_MODEL = "upload_model"
UPLOAD_ARCH = "upload_arch"
#: ``(upload's file id, architectures it fits)`` of the last uploaded checkpoint (the picker follows it once).
UPLOAD_ARCH_GUESS = "upload_arch_guess"
UPLOAD_DATA = "upload_data"
UPLOAD_REGISTERED = "upload_registered"
UPLOAD_COMPUTE = "upload_compute"

# ---- jobs (studio.jobbox)
#: This session's background jobs whose run is still to be adopted: job key -> make it current.
PENDING_JOBS = "pending_jobs"
#: This session's failure and cancellation messages for the sidebar: (kind, text), each shown once.
JOB_MESSAGES = "job_messages"
#: Where a job's failure or cancellation is said, for the jobs started by a form of the sidebar (job key -> the
#: form's name: ``jobbox.start_job(place=)``), and those messages waiting to be drawn there (form name -> (kind, text)).
JOB_PLACES = "job_places"
PLACED_MESSAGES = "placed_messages"
#: Jobs cancelled from their own progress box, their cancellation still to be said there (``jobbox.wait_for``).
CANCELLED_HERE = "cancelled_here"
#: A random id of this session (groups its ε passes so that a new one cancels the previous ones).
SESSION_ID = "_session_key"
#: The slot at the top of the page where a page waiting on a job shows its progress (``jobbox.status_area``).
STATUS_SLOT = "_status_slot"
#: Prefixes of the Cancel buttons of a job (:func:`item_key` with the job's key): in its progress box, in the
#: sidebar's jobs panel.
CANCEL, CANCEL_PANEL = "cancel", "cancel_panel"


def results_key(page: str) -> str:
    """A study page's results (``jobbox.study_result``), least recently used dropped; ``page`` is its prefix."""
    return f"{page}_results"


def last_key(page: str) -> str:
    """A study page's last settings per scope (``jobbox.study_result``); ``page`` is its prefix."""
    return f"{page}_last"


def run_button_key(page: str) -> str:
    """A study page's Run button (``jobbox.study_run``); ``page`` is its prefix."""
    return f"{page}_run"


def item_key(prefix: str, *parts: str) -> str:
    """The key of one of several widgets of a kind (a job's Cancel button, a chart): ``prefix_part_...``."""
    return "_".join((prefix, *parts))


def session_id() -> str:
    """This session's random id (made on first use)."""
    return st.session_state.setdefault(SESSION_ID, uuid.uuid4().hex)


# ---- the settings every page shares (the tuning fraction, seeds, T, λ, ε): one value, whichever page sets it
#: The shared values by name (``scorecard.Shared``'s fields), a plain dict.
SHARED = "shared_setting"
#: Each page widget's value when it last took the shared one (:func:`share` tells a change on the page by it).
SHARED_SEEN = "_shared_seen"
#: The sidebar's slot of the shared settings' line (:func:`show_shared`), made by ``studio.frame.draw``.
SHARED_SLOT = "_shared_slot"
#: The seed counts every page offers (one range, so that a count set on one page fits every other).
SEEDS_MAX = 20


def shared() -> scorecard.Shared:
    """The settings every page shares, as they stand."""
    values = st.session_state.setdefault(SHARED, dict(vars(scorecard.Shared())))
    return scorecard.Shared(**values)


def share(keys: Mapping[str, str]) -> None:
    """Tie a page's widgets (widget key -> name of a shared setting) to the shared settings; call it before the
    widgets are drawn, on every run of the page (fragment runs included). A widget changed on this page since it
    last took the shared value sets the shared value; every widget then shows the shared value, so a change on
    one page shows on all the others."""
    values = st.session_state.setdefault(SHARED, dict(vars(scorecard.Shared())))
    seen = st.session_state.setdefault(SHARED_SEEN, {})
    for key, name in keys.items():
        if key in st.session_state and (key not in seen or st.session_state[key] != seen[key]):
            values[name] = st.session_state[key]
    # A full run writes every value: a widget that the previous run did not draw (another page, another study)
    # came back at its first option in the browser otherwise. A fragment's rerun (a control of that fragment
    # moved) writes only what differs: a value written through the session state reaches the browser as set by
    # the app and undid a move of another control still on its way to the server (a λ press after a T press).
    fragment_rerun = bool(getattr(get_script_run_ctx(), "fragment_ids_this_run", None))
    for key, name in keys.items():
        seen[key] = values[name]
        if not fragment_rerun or key not in st.session_state or st.session_state[key] != values[name]:
            st.session_state[key] = values[name]
    show_shared()  # the sidebar's line says the values now in force (a fragment's share too: Explore's λ)


def show_shared() -> None:
    """The sidebar's line of the shared settings as they stand now, in the slot ``studio.frame.draw`` made: drawn
    by the frame before the page, then again by every :func:`share` (a value moved on the page, a shared link's λ,
    Explore's sliders on the panel's own fragment reruns: Streamlit lets a fragment rewrite a slot made outside it
    when it wrote that slot in the full run too, as Explore's panel does on every run)."""
    slot = st.session_state.get(SHARED_SLOT)
    if slot is None:
        return
    run = runs.RUNS.get(st.session_state.get(RUN_ID))
    values = shared()
    eps_not_applied = values.eps != 0 and run is not None and (run.model is None or run.images is None)
    slot.caption(
        f"**Shared settings**: {values.words()}"
        + (" (ε does not apply to this run: it is scored at ε = 0)" if eps_not_applied else "")
        + ". Every page uses them by default: changing one on any page changes it on all; a result computed "
        "otherwise says so beside it."
    )


# ---- defaults: seeded before a page draws its widgets
def restore(defaults: Mapping[str, object], kept_key: str) -> None:
    """Give each key the value :func:`keep` saved, else its default, unless this session holds a value for it.

    Streamlit drops a widget's state on a run that does not draw it (another page, another study): re-assigned
    every run from a plain copy, the choices survive both (without it the browser showed a slider's first
    option, and a visit to another page reset every option)."""
    kept = st.session_state.setdefault(kept_key, {})
    for key, value in defaults.items():
        st.session_state[key] = st.session_state.get(key, kept.get(key, value))


def keep(keys: Iterable[str], kept_key: str) -> None:
    """Save the widgets' values in the plain copy that :func:`restore` reads."""
    st.session_state.setdefault(kept_key, {}).update({key: st.session_state[key] for key in keys})


def browser_reported(key: str) -> bool:
    """Whether the browser sent a value of the widget ``key`` with this script run's request (False when it
    cannot be told: Streamlit's internals moved). A widget the browser has never mounted (one in a popover not
    yet opened) sends none."""
    try:
        from streamlit.runtime.state.session_state_proxy import get_session_state

        inner = get_session_state()._state
        widget_id = inner._key_id_mapper.get_id_from_key(key)
        return widget_id is not None and widget_id in inner._new_widget_state.states
    except AttributeError:
        return False


def resend_unreported(keys: Iterable[str]) -> None:
    """Write again, before their widgets are drawn, the values of ``keys`` the browser did not send with this
    run, so that this run's widgets carry them to the browser.

    A widget in a popover is mounted only when the popover opens, and it then takes the value of the last
    message that set it; a fragment's rerun does not set it (only a value written in that run does), so a
    popover first opened after one (Explore's paired-interval poll) showed its first option (a shared link's
    guaranteed risk as "target TPR", r* 0.5 %), and the next rerun sent those back. A widget the browser has
    reported is left alone: writing it would undo a move of it still on its way to the server."""
    for key in keys:
        if key in st.session_state and not browser_reported(key):
            st.session_state[key] = st.session_state[key]


# ---- Start (app_pages/Start.py)
START_DSTAR = "start_dstar"
START_CONFUSION = "start_confusion"
START_EXPLORE = "start_explore"
#: The scorecard's bordered container (its rows' gap is set by the page's style).
START_SCORECARD = "start_scorecard"
#: The one split's verdict while its paired bootstrap runs (a line that polls its fragment until it lands).
START_VERDICT = "start_verdict"

# ---- Corruptions (app_pages/Corruptions.py)
#: The page's prefix: its Run button and results (``jobbox.study_run``).
CORRUPTIONS_PAGE = "rob"
ROB_SEVERITY = "rob_severity"
ROB_TUNE_FRACTION = "rob_tune_fraction"
ROB_SEEDS = "rob_seeds"
ROB_SUBSAMPLE = "rob_subsample"
ROB_DETECTORS = "rob_detectors"
ROB_CORRUPTIONS = "rob_corruptions"
ROB_CRITERION = "rob_criterion"
ROB_IMAGE = "rob_image"
ROB_RADAR_AUROC = "rob_radar_auroc"
ROB_RADAR_FPR = "rob_radar_fpr"
ROB_ACCURACY = "rob_accuracy"
ROB_DL_TABLE = "rob_dl_table"
ROB_DL_SEEDS = "rob_dl_seeds"
#: The plain copy of the page's settings (:func:`restore`, :func:`keep`).
ROB_KEPT = "rob_kept"
#: The page's widgets tied to the shared settings (:func:`share`).
ROB_SHARED = {ROB_TUNE_FRACTION: "tune_fraction", ROB_SEEDS: "seeds"}


def rob_defaults() -> dict[str, object]:
    """The Corruptions page's settings until changed: severity 5 as in the paper's radar plots, a subsample of
    the images per corruption on a CPU and every image on a GPU (0: every image). The tuning fraction and the
    seeds are the shared ones (:data:`ROB_SHARED`)."""
    return {
        ROB_SEVERITY: robustness.DEFAULT_SEVERITY,
        ROB_SUBSAMPLE: robustness.default_subsample() or 0,
        ROB_DETECTORS: list(protocol.PAIRED),
        ROB_CORRUPTIONS: list(corruptions.CORRUPTIONS),
        ROB_CRITERION: robustness.DEFAULT_CRITERION,
        ROB_IMAGE: 0,
    }


# ---- Studies (app_pages/Studies.py)
#: The page's prefix: its Run button and results (``jobbox.study_run``).
STUDIES_PAGE = "study"
STUDY_NAME = "study_name"
STUDY_SEEDS = "study_seeds"
STUDY_FRACTION = "study_fraction"
STUDY_BOOTSTRAP = "study_bootstrap"
STUDY_AXES = "study_axes"
STUDY_SUBSAMPLE = "study_subsample"
STUDY_FRACTIONS = "study_fractions"
STUDY_EXTRA_FRACTIONS = "study_extra_fractions"
STUDY_OTHER = "study_other"
STUDY_EXCLUDE = "study_exclude"
#: The plain copy of the page's settings (:func:`restore`, :func:`keep`).
STUDY_KEPT = "study_kept"
#: The page's widgets tied to the shared settings (:func:`share`).
STUDY_SHARED = {STUDY_FRACTION: "tune_fraction", STUDY_SEEDS: "seeds"}
STUDY_IMAGE_FORMAT = "study_image_format"
#: Prefixes (:func:`item_key`) of a chart (with its slug) and of a download button (``csv`` or ``html`` and the
#: chart's slug, or a CSV file's name).
STUDY_CHART, STUDY_DOWNLOAD = "study_chart", "study_dl"


def study_defaults() -> dict[str, object]:
    """The Studies page's options until changed (the tuning fraction and the seeds are the shared ones,
    :data:`STUDY_SHARED`; the ε axis's images: a subsample on a CPU, 0 for every image)."""
    return {
        STUDY_NAME: "ablation",
        STUDY_BOOTSTRAP: 1000,
        STUDY_AXES: ["lambda", "temperature"],
        STUDY_SUBSAMPLE: robustness.default_subsample() or 0,
        STUDY_FRACTIONS: list(protocol.TUNE_FRACTION_PRESETS),
        STUDY_EXTRA_FRACTIONS: "",
        STUDY_OTHER: "cifar100-exact",
        STUDY_EXCLUDE: "",
    }


# ---- Baselines (app_pages/Baselines.py)
#: The page's prefix: its Run button and results (``jobbox.study_run``).
BASELINES_PAGE = "bl"
BL_TUNE_FRACTION = "bl_tune_fraction"
BL_SEEDS = "bl_seeds"
BL_COVERAGE = "bl_coverage"
BL_DETECTORS = "bl_detectors"
#: The plain copy of the page's settings (:func:`restore`, :func:`keep`).
BL_KEPT = "bl_kept"
#: The page's widgets tied to the shared settings (:func:`share`).
BL_SHARED = {BL_TUNE_FRACTION: "tune_fraction", BL_SEEDS: "seeds"}
BL_ROC = "bl_roc"
BL_RISK_COVERAGE = "bl_rc"
BL_DL_TABLE = "bl_dl_table"
BL_DL_SEEDS = "bl_dl_seeds"
#: The prefix (:func:`item_key`) of a figure's download button (with the figure's name and ``html`` or ``csv``).
BL_DOWNLOAD = "bl_dl"


def bl_defaults(usable: Collection[str], slow: Collection[str] = ()) -> dict[str, object]:
    """The Baselines page's settings until changed; the detectors are the study's that the run can score, but
    the ``slow`` ones (``baselines.trains_on_first_use``). The tuning fraction and the seeds are the shared ones
    (:data:`BL_SHARED`)."""
    return {
        BL_COVERAGE: baselines.DEFAULT_COVERAGE,
        BL_DETECTORS: [k for k in baselines.STUDY_KEYS if k in usable and k not in slow],
    }


# ---- Training objectives (app_pages/Objectives.py)
#: The page's prefix: its Run button and results (``jobbox.study_run``).
OBJECTIVES_PAGE = "obj"
OBJ_DATASET = "obj_dataset"
OBJ_OBJECTIVES = "obj_objectives"
OBJ_EPOCHS = "obj_epochs"
OBJ_SEEDS = "obj_seeds"
OBJ_SELECTION = "obj_selection"
OBJ_MODEL = "obj_model"
OBJ_RECIPE = "obj_recipe"
#: The (data set, network, recipe) the epoch cap was last defaulted for: a new choice resets the cap to its default.
OBJ_DEFAULTED_FOR = "obj_defaulted_for"
#: The plain copy of the page's settings (:func:`restore`, :func:`keep`).
OBJ_KEPT = "obj_kept"
#: The current run the page last opened on: a run made current since opens it on that run's data set.
OBJ_OPENED_FOR = "obj_opened_for"
#: The page's widgets tied to the shared settings (:func:`share`).
OBJ_SHARED = {OBJ_SEEDS: "seeds"}
#: The prefix (:func:`item_key`) of a row's "open in Explore" button (with the objective's name).
OBJ_OPEN = "obj_open"
OBJ_DOWNLOAD = "obj_dl"


def obj_defaults(dataset: str, trainable: list[str], model: str, recipe: str, epochs: int) -> dict[str, object]:
    """The training-objectives page's settings until changed: ``dataset`` (Fashion-MNIST where it is here),
    every objective it can train, its default network and recipe and their epoch cap
    (``objectives.default_epochs``) and the paper's selection of T and λ inside the tuning split; the split seeds
    are the shared ones (:data:`OBJ_SHARED`)."""
    return {
        OBJ_DATASET: dataset,
        OBJ_OBJECTIVES: trainable,
        OBJ_MODEL: model,
        OBJ_RECIPE: recipe,
        OBJ_EPOCHS: epochs,
        OBJ_SELECTION: "tuning",
    }


# ---- the ε grid an honest selection searches (studio.eps_choice): the Studies page's ladder, Training objectives
#: Each page's choice of grid (a name of ``studio.eps_choice.GRIDS``), :data:`EPS_GRID_DEFAULT` until changed:
#: none (ε = 0, logits only).
STUDY_EPS_GRID = "study_eps_grid"
OBJ_EPS_GRID = "obj_eps_grid"
EPS_GRID_DEFAULT = "none"


# ---- Runs compared side by side (app_pages/Compare.py)
#: The page's prefix: its Run button and results (``jobbox.study_run``).
COMPARE_PAGE = "cmp"
CMP_RUNS = "cmp_runs"
CMP_DETECTORS = "cmp_detectors"
CMP_TEMPERATURE = "cmp_temperature"
CMP_LAM = "cmp_lam"
CMP_TUNE_FRACTION = "cmp_tune_fraction"
CMP_SEEDS = "cmp_seeds"
#: The plain copy of the page's settings (:func:`restore`, :func:`keep`).
CMP_KEPT = "cmp_kept"
#: The page's widgets tied to the shared settings (:func:`share`).
CMP_SHARED = {CMP_TEMPERATURE: "temperature", CMP_LAM: "lam", CMP_TUNE_FRACTION: "tune_fraction", CMP_SEEDS: "seeds"}
#: Runs of the comparison dropped from the server's run registry, said on the page until loaded again (oldest first).
CMP_DROPPED = "cmp_dropped"
#: The session's loaded runs the page has already offered: a run loaded since joins the comparison by itself.
CMP_SEEN = "cmp_seen"
#: The prefix (:func:`item_key`) of a dropped run's "Load it again" button (with the run's id).
CMP_RELOAD = "cmp_reload"
CMP_ROC = "cmp_roc"
CMP_RISK_COVERAGE = "cmp_rc"
#: The prefix (:func:`item_key`) of the page's download buttons (with the file's name).
CMP_DOWNLOAD = "cmp_dl"


def cmp_defaults(run_ids: list[str]) -> dict[str, object]:
    """The comparison page's settings until changed: the first runs loaded (up to four) and the paper's Table 1
    detectors; T, λ, the tuning fraction and the seeds are the shared ones (:data:`CMP_SHARED`)."""
    return {
        CMP_RUNS: run_ids[:4],
        CMP_DETECTORS: ["msp", "odin", "doctor", "relu"],
    }


# ---- URL query parameters (studio.query); Explore's widgets are seeded from them
QUERY_PARAMS_READ = "_query_params_read"
QUERY_RUN_READ = "_query_run_read"
QUERY_RUN_NOTICE = "_query_run_notice"
#: What the URL set that Explore could not take as given (``studio.query.init_from_query_params``).
QUERY_PARAMS_NOTICE = "_query_params_notice"

# ---- Explore (app_pages/Explore.py); the URL parameters lam, T, eps, tune and seed set the first six (studio.query)
#: The settings a shared URL sets (its ``lam``, ``T``, ``eps``, ``tune`` and ``seed``; ``studio.query``).
EX_LAM, EX_LAM_AUTO, EX_TEMPERATURE, EX_EPS, EX_TUNE_FRACTION, EX_SEED = (
    "ex_lam",
    "ex_lam_auto",
    "ex_temperature",
    "ex_eps",
    "ex_tune_fraction",
    "ex_seed",
)
EX_DETECTORS = "ex_detectors"
EX_OP_KIND = "ex_op_kind"
#: The operating-point radio's choice for each kind of ``explore.Setting.op_kind``.
OP_KINDS = {"tpr": "target TPR", "errors": "errors caught", "coverage": "coverage", "risk": "guaranteed risk"}
EX_OP_TARGET = "ex_op_target"
#: The guaranteed risk's r* and δ (``explore.Setting.op_target`` and ``op_delta`` when the kind is "risk").
EX_OP_RISK, EX_OP_DELTA = "ex_op_risk", "ex_op_delta"
#: r* until changed: 5 % (one of ``explore.RISKS``).
DEFAULT_OP_RISK = 0.05
#: The plain copy of the Explore controls (:func:`keep`), restored after a visit to another page.
EX_KEPT = "ex_kept"


def explore_shared(has_model: bool) -> dict[str, str]:
    """Explore's widgets tied to the shared settings (:func:`share`); ε only on a run that can use it (a run
    of logits only shows ε = 0 without changing the shared value)."""
    keys = {EX_TUNE_FRACTION: "tune_fraction", EX_TEMPERATURE: "temperature", EX_LAM: "lam"}
    return {**keys, EX_EPS: "eps"} if has_model else keys


def explore_defaults() -> dict[str, object]:
    """The Explore page's settings until changed: ``explore.Setting``'s defaults (λ = 0.5 fitted on half of the
    data at T = 1 without input pre-processing, Rel-U against Doctor, the operating point at the paper's 95 %
    TPR) as the widgets hold them. A shared URL sets the first six instead (``studio.query``)."""
    default = explore.Setting()
    return {
        EX_LAM: default.lam,
        EX_LAM_AUTO: default.lam == "auto",
        EX_TEMPERATURE: default.temperature,
        EX_EPS: default.eps,
        EX_TUNE_FRACTION: default.tune_fraction,
        EX_SEED: default.seed,
        EX_DETECTORS: list(default.detectors),
        EX_OP_KIND: OP_KINDS[default.op_kind],
        EX_OP_TARGET: default.op_target,
        EX_OP_RISK: DEFAULT_OP_RISK,
        EX_OP_DELTA: default.op_delta,
    }


#: The prefix (:func:`item_key`) of a chart (with the chart's name).
EX_CHART = "ex_chart"
#: The toggle that shows Doctor's implicit matrix in place of D*.
EX_SHOW_DOCTOR = "ex_show_doctor"
#: The toggle that shows the generalised risk-coverage curve (AUGRC) in place of the selective one (AURC).
EX_GENERALIZED_RISK = "ex_generalized_risk"
#: The open detail tab under the metrics (operating point, a cell's samples, errors one detector catches).
EX_DETAIL_TAB = "ex_detail_tab"
#: The confusion-matrix cell whose samples the gallery shows, and the split they come from.
EX_PAIR_TRUE = "ex_pair_true"
EX_PAIR_PRED = "ex_pair_pred"
EX_GALLERY_SPLIT = "ex_gallery_split"
#: The gallery's choices of split.
GALLERY_SPLITS = ("tuning split (as the matrix)", "evaluation split")
#: The gallery's choices (widget key -> value), a plain dict its three widgets mirror: they are drawn only while
#: their tab is open, the pair is also set by a click on the matrix, and Streamlit drops an undrawn widget's
#: state (a page visit left a stale pair behind).
EX_GALLERY_PICK = "ex_gallery_pick"
#: How many confusion cells were clicked; the click whose scroll to the gallery is still to be made; the scroll.
EX_CELL_CLICKS, EX_SCROLL_PENDING, EX_SCROLL_GALLERY = "ex_cell_clicks", "ex_scroll_pending", "ex_scroll_gallery"
#: How many samples each gallery shows (gallery name -> (its samples' digest, count)), and its "Show more" buttons
#: (one per gallery: ``item_key(EX_GALLERY_MORE, name)``).
EX_GALLERY_SHOWN = "ex_gallery_shown"
EX_GALLERY_MORE = "ex_gallery_more"


def gallery_defaults() -> dict[str, object]:
    """The cell gallery's choices until changed (a run opens it on its most frequent confusion instead)."""
    return {EX_PAIR_TRUE: 0, EX_PAIR_PRED: 0, EX_GALLERY_SPLIT: GALLERY_SPLITS[0]}


#: The run whose gallery cell was last set (a new run opens on its most frequent confusion).
EX_PAIR_RUN = "ex_pair_run"
#: This session's memory of its ε passes (``explore.EpsMemory``: the last result shown, the passes that failed).
EX_EPS_MEMORY = "ex_eps_memory"
EX_EPS_RETRY = "ex_eps_retry"
#: Explore's panel runs in this session, counted (the browser's following of λ tells its runs apart by it).
EX_FOLLOW_RUN = "ex_follow_run"
#: The paired bootstraps this session's last Explore run needed (its view's and its λ neighbours'): a later run
#: cancels those it no longer shows (``explore_ui.cancel_superseded_paired``).
EX_PAIRED_KEYS = "ex_paired_keys"
EX_DL_REPORT = "ex_dl_report"
#: The view's data as a ZIP (D*, every chart's data, the metrics, the settings).
EX_DL_DATA = "ex_dl_data"
#: Explore's "Export this detector" download (Rel-U at the view's setting, TorchScript + ONNX + card, built when clicked).
EX_DL_DETECTOR = "ex_dl_detector"
