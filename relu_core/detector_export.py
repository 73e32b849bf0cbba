"""A deployable detector: the fitted detector of a run (D*, T, the threshold of an operating point, the class
names) as a PyTorch ExportedProgram (``torch.export``, ``.pt2``) and an ONNX graph, with a JSON card.

:func:`fit_deployable` fits the detector on the run's tuning split (the split Explore uses: ``explore.cached``)
and reads its threshold either on that split (the lowest reaching a target TPR or coverage,
``metrics.operating_point``) or, at a guaranteed risk, on a calibration part of the rest
(``risk_control.guaranteed_risk``: at most r* errors among accepted, with confidence 1 − δ); the accept decisions it
gives on the evaluation split (the rest, or its other part) are then counted, with bootstrap intervals
(``stats.acceptance_rates``). :func:`export` writes it as files:

- logits in (float32 (N, C)): ``(prediction, uncertainty, accept)`` out, prediction = argmax, uncertainty the
  library's score (``detectors.softmax`` at T in float64, then the detector's own ``score_probs``: the module is
  captured through the library's functions, so no formula is written twice), accept = uncertainty <= threshold;
- images in (uint8 (N, H, W, C), when the run has a PyTorch model): the run's normalisation and model first.

Formats (:data:`FORMATS`): ``.pt2`` (``torch.export.save``; ``torch.export.load(path).module()``), ``.onnx``
(opset 17) and, legacy, ``.pt`` (TorchScript: ``torch.jit`` is deprecated since PyTorch 2.14; still the only
PyTorch format for the images-in detector of a TorchScript model, which torch.export cannot capture). Each file
carries the card: ``.pt2`` and ``.pt`` as the extra file ``detector.json``, ONNX graphs as the metadata property
``detector.json`` (and ``class_names``). The card is strict JSON (a rate that is 0/0 is null, and the card says
why) and holds no server path.
"""

from __future__ import annotations

import copy
import importlib.metadata
import io
import json
import math
import re
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from relu_core import detectors, extras, metrics, report, risk_control, stats
from relu_core.errors import InputError
from relu_core.explore import cached
from relu_core.explore.setting import Setting
from relu_core.models.normalization import Normalization

#: The detectors that can be exported (those Explore and the paper compare, the learned one first).
EXPORTABLE = ("relu", "doctor", "msp")
#: The file formats by suffix, and how each is loaded.
FORMATS = {
    ".pt2": "PyTorch ExportedProgram (torch.export): torch.export.load(path).module()",
    ".onnx": "ONNX graph, opset 17: onnxruntime.InferenceSession(path)",
    ".pt": "TorchScript, legacy (torch.jit is deprecated since PyTorch 2.14): torch.jit.load(path)",
}
SUFFIXES = tuple(FORMATS)
#: The formats Explore's ZIP holds (the legacy TorchScript only where .pt2 cannot be written).
ZIP_SUFFIXES = (".onnx", ".pt2")
#: Why the images-in detector of a TorchScript model has no .pt2.
NO_PT2_FOR_TORCHSCRIPT = (
    "the images-in detector of a TorchScript model cannot be written as .pt2 (torch.export does not capture "
    "TorchScript code): write it as .onnx, or as .pt (legacy TorchScript), or export the logits-in detector"
)
#: What null means in a card (strict JSON has no NaN).
NULL_MEANING = (
    "a rate whose denominator is 0 is undefined and written as null, never as NaN (which strict JSON parsers "
    "refuse): e.g. the FPR of a split without errors, or the risk when nothing is accepted; its interval is null "
    "too, with n_resamples 0"
)
INPUTS = ("logits", "images")
OUTPUT_NAMES = ("prediction", "uncertainty", "accept")
CARD_NAME = "detector.json"
ONNX_OPSET = 17
#: Packages whose versions the card names besides the report's.
CARD_PACKAGES = ("onnx", "onnxruntime")
#: What needs the [onnx] extra here (``extras.require``).
ONNX_PURPOSE = "exporting a detector as ONNX"


@dataclass(frozen=True, eq=False)
class DeployedDetector:
    """A detector fitted on a run's tuning split with the threshold of its operating point, and what its accept
    decisions give on the evaluation split (``evaluation``: TPR, FPR, coverage and risk with intervals).

    The threshold comes from the tuning split (``tuning``: the operating point there) or, at a guaranteed risk,
    from a calibration part of the held-out samples (``guarantee``: the certificate; ``evaluation`` then covers
    the held-out samples' other part, ``n_eval`` of them).

    The tie rule (``tie_slack``, :func:`tie_slack`): the exported module accepts a row when its uncertainty is at
    most ``accept_up_to`` = threshold + ``tie_slack``, a few parts in 2^40 above the threshold, never as far as the
    run's next score. A matrix product rounds a row's score differently in a batch of 1 and of 1,000 (Rel-U's
    ``P D``: a few ulps), so a row exactly on the threshold would be accepted in one batch and refused in the
    other; within the slack it is on the threshold in every batch. The run's own rows are decided as by
    ``uncertainty <= threshold`` (none lies inside the slack), which is what the evaluation rates and a
    certificate count."""

    detector: detectors.Detector
    setting: Setting
    threshold: float
    class_names: tuple[str, ...]
    n_tune: int
    n_eval: int
    tuning: metrics.OperatingPoint | None
    evaluation: dict[str, stats.RateInterval]
    guarantee: risk_control.GuaranteedRisk | None = None
    tie_slack: float = 0.0

    @property
    def key(self) -> str:
        return self.detector.key

    @property
    def accept_up_to(self) -> float:
        """The largest uncertainty the exported module accepts: the threshold and its tie rule's slack."""
        return self.threshold + self.tie_slack


#: The tie rule's slack, relative to the threshold (:class:`DeployedDetector`): 2^-40, about 4,000 ulps of a
#: float64, far above the rounding of a batch's matrix products and far below any difference between two scores.
TIE_RELATIVE = 2.0**-40


def tie_slack(threshold: float, scores) -> float:
    """How far above ``threshold`` a row still counts as on it (:class:`DeployedDetector`'s tie rule):
    ``|threshold| · TIE_RELATIVE``, at most half the gap to the next of ``scores`` above it (the run's own rows,
    so that none of them changes side; 0 when the threshold is 0, a score computed exactly)."""
    threshold = float(threshold)
    slack = abs(threshold) * TIE_RELATIVE
    scores = np.asarray(scores, dtype=np.float64)
    above = scores[scores > threshold]
    if above.size:
        slack = min(slack, (float(above.min()) - threshold) / 2.0)
    return slack


def unfitted(key: str, setting: Setting) -> detectors.Detector:
    """The detector ``key`` at ``setting``'s T and λ, unfitted; InputError unless it is one of :data:`EXPORTABLE`
    at a temperature it has (MSP is defined at T = 1)."""
    key = detectors.detector_key(key)
    if key not in EXPORTABLE:
        raise InputError(f"the detector {key!r} cannot be exported; choose one of {', '.join(EXPORTABLE)}")
    detector = detectors.make_detector(key, setting.temperature, setting.lam)
    if detector.temperature != setting.temperature:
        raise InputError(f"{detector.name} is defined at T = 1, not T = {setting.temperature:g}")
    return detector


def fit_deployable(
    run,
    key: str = "relu",
    *,
    temperature: float = 1.0,
    lam: float | str = 0.5,
    tune_fraction: float = 0.5,
    seed: int = 0,
    op_kind: str = "tpr",
    op_target: float = 0.95,
    op_delta: float = risk_control.DEFAULT_DELTA,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
) -> DeployedDetector:
    """The detector ``key`` (one of :data:`EXPORTABLE`) of ``run`` at T and λ, fitted on the seeded tuning split
    (``tune_fraction``, ``seed``: Explore's split), with its accept decisions on the evaluation split
    (``n_resamples`` bootstrap resamples, seeded with ``seed``).

    The threshold: with ``op_kind`` "tpr" or "coverage", the lowest reaching ``op_target`` on the tuning split;
    with "risk", the threshold that keeps at most ``op_target`` (r*) errors among accepted with confidence
    1 − ``op_delta``, certified on the calibration half of the held-out samples
    (``risk_control.calibration_split``, ``guaranteed_risk``), the evaluation split then being the other half.
    InputError for anything else, MSP at T ≠ 1 (MSP is defined at T = 1), or a guarantee that cannot be
    certified (its one-line reason)."""
    setting = Setting(
        temperature=temperature,
        lam=lam,
        tune_fraction=tune_fraction,
        seed=seed,
        op_kind=op_kind,
        op_target=op_target,
        op_delta=op_delta,
    )
    detector = unfitted(key, setting)
    _, correct = cached.correctness(run)
    tune_idx, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    probs = cached.probs_at(run, detector.temperature)
    detector.fit_probs(probs[tune_idx], correct[tune_idx])
    uncertainty = np.asarray(detector.score_probs(probs), dtype=np.float64)
    tuning = guarantee = None
    if setting.guaranteed:
        cal_idx, eval_idx = risk_control.calibration_split(eval_idx, setting.seed)
        start = risk_control.start_threshold(uncertainty[eval_idx], cal_idx.size, setting.op_target, setting.op_delta)
        guarantee = risk_control.guaranteed_risk(
            uncertainty[cal_idx], correct[cal_idx], setting.op_target, setting.op_delta, start=start
        )
        if not guarantee.certified:
            raise InputError(f"{detector.name}: no threshold can be certified: {guarantee.refusal}")
        threshold = guarantee.threshold
    else:
        tuning = metrics.operating_point(uncertainty[tune_idx], correct[tune_idx], setting.op_kind, setting.op_target)
        threshold = tuning.threshold
    slack = tie_slack(threshold, uncertainty)
    accepted = uncertainty[eval_idx] <= threshold + slack  # the module's rule; no row of the run inside the slack
    evaluation = stats.acceptance_rates(accepted, correct[eval_idx], n_resamples=n_resamples, seed=setting.seed)
    return DeployedDetector(
        detector,
        setting,
        float(threshold),
        tuple(run.class_names),
        tune_idx.size,
        eval_idx.size,
        tuning,
        evaluation,
        guarantee,
        slack,
    )


def from_setting(
    run, setting: Setting, key: str = "relu", n_resamples: int = stats.DEFAULT_RESAMPLES
) -> DeployedDetector:
    """:func:`fit_deployable` at a ``setting`` (its T, λ, split and operating point; Rel-U by default): Explore's
    button and the CLI's ``export`` both build one."""
    return fit_deployable(
        run,
        key,
        temperature=setting.temperature,
        lam=setting.lam,
        tune_fraction=setting.tune_fraction,
        seed=setting.seed,
        op_kind=setting.op_kind,
        op_target=setting.op_target,
        op_delta=setting.op_delta,
        n_resamples=n_resamples,
    )


# --------------------------------------------------------------------------------------------- modules


class LogitsDetector(nn.Module):
    """Logits (N, C) in, ``(prediction, uncertainty, accept)`` out, through the library's own functions."""

    def __init__(self, fitted: DeployedDetector) -> None:
        super().__init__()
        self.fitted = fitted

    def forward(self, logits: torch.Tensor):
        detector = self.fitted.detector
        uncertainty = detector.score_probs(detectors.softmax(logits.double(), detector.temperature))
        return logits.argmax(dim=1), uncertainty, uncertainty <= self.fitted.accept_up_to  # the tie rule


def is_torchscript(model: nn.Module | None) -> bool:
    """Whether ``model`` is (or holds) TorchScript, which torch.export cannot capture."""
    return model is not None and any(isinstance(m, torch.jit.ScriptModule) for m in model.modules())


def _frozen_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode without gradients (the run's own model is left as it is). A TorchScript
    module copies too, but refuses ``requires_grad_``: its parameters are frozen one by one."""
    with torch.no_grad():
        frozen = copy.deepcopy(model).eval()
    for parameter in frozen.parameters():
        parameter.requires_grad_(False)
    return frozen


class ImageDetector(nn.Module):
    """uint8 images (N, H, W, C) in: the run's normalisation and model, then :class:`LogitsDetector`."""

    def __init__(self, model: nn.Module, normalization: Normalization, head: LogitsDetector) -> None:
        super().__init__()
        self.model = _frozen_copy(model)  # the exported outputs are plain tensors
        self.normalise = normalization.on(torch.device("cpu"))
        self.head = head

    def forward(self, images: torch.Tensor):
        return self.head(self.model(self.normalise(images)).float())


def module_for(run, fitted: DeployedDetector, inputs: str) -> tuple[nn.Module, torch.Tensor]:
    """The module taking ``inputs`` ("logits" or "images") and an example input (two of the run's samples)."""
    head = LogitsDetector(fitted)
    if inputs == "logits":
        return head, torch.from_numpy(np.array(run.logits[:2], dtype=np.float32))
    if inputs != "images":
        raise InputError(f"the detector takes {' or '.join(INPUTS)}, not {inputs!r}")
    if getattr(run, "onnx_file", ""):
        raise InputError(
            "the images-in detector wraps a PyTorch model, and this run's model is ONNX: export the logits-in "
            "detector and run it on the ONNX model's logits"
        )
    if run.model is None or run.images is None:
        raise InputError("the images-in detector needs a run with its model and images; this run has logits only")
    module = ImageDetector(run.model, Normalization(tuple(run.mean), tuple(run.std)), head)
    return module, torch.from_numpy(np.array(run.images[:2]))


def _traced(module: nn.Module, example: torch.Tensor) -> torch.jit.ScriptModule:
    """``module`` traced on ``example`` (the library's checks that read values, e.g. the finiteness of logits / T,
    are Python branches that a trace leaves out: non-finite logits give a NaN uncertainty, never accepted)."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarning: those very checks; torch.jit's deprecation notice
        return torch.jit.trace(module.eval(), example, check_trace=False)


def _card_text(card: dict, indent: int | None = 2) -> str:
    return json.dumps(card, indent=indent, ensure_ascii=False, allow_nan=False)


def exported_program(module: nn.Module, example: torch.Tensor) -> torch.export.ExportedProgram:
    """``module`` captured by ``torch.export`` on ``example``, for any batch size (the library's value checks
    are skipped while a graph is captured: non-finite logits give a NaN uncertainty, never accepted).
    InputError when the module holds TorchScript (:data:`NO_PT2_FOR_TORCHSCRIPT`)."""
    if is_torchscript(module):
        raise InputError(NO_PT2_FOR_TORCHSCRIPT)
    batch = torch.export.Dim("n", min=1)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), (example,), dynamic_shapes=({0: batch},), strict=False)


def pt2_bytes(module: nn.Module, example: torch.Tensor, card: dict) -> bytes:
    """``module`` as an ExportedProgram archive (``torch.export.save``), ``card`` inside as the extra file
    ``detector.json``; ``torch.export.load(path, extra_files={"detector.json": ""})`` reads both."""
    buffer = io.BytesIO()
    program = exported_program(module, example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.save(program, buffer, extra_files={CARD_NAME: _card_text(card)})
    return buffer.getvalue()


def torchscript_bytes(module: nn.Module, example: torch.Tensor, card: dict) -> bytes:
    """Legacy: the traced ``module`` as a TorchScript archive, ``card`` inside as the extra file
    ``detector.json``."""
    buffer = io.BytesIO()
    traced = _traced(module, example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.save is deprecated": still the TorchScript format
        torch.jit.save(traced, buffer, _extra_files={CARD_NAME: _card_text(card)})
    return buffer.getvalue()


def onnx_bytes(module: nn.Module, example: torch.Tensor, card: dict, input_name: str) -> bytes:
    """``module`` as an ONNX graph (opset :data:`ONNX_OPSET`, any batch size), ``card`` and the class names in
    its metadata. A module holding TorchScript is traced first (the exporter then reads the TorchScript graph)."""
    onnx = extras.require("onnx", ONNX_PURPOSE)
    buffer = io.BytesIO()
    axes = {name: {0: "n"} for name in (input_name, *OUTPUT_NAMES)}
    source = _traced(module, example) if is_torchscript(module) else module.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # the TorchScript-based exporter: the library's value checks are Python branches its trace leaves out
        torch.onnx.export(
            source,
            (example,),
            buffer,
            dynamo=False,
            input_names=[input_name],
            output_names=list(OUTPUT_NAMES),
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
        )
    graph = onnx.load_model_from_string(buffer.getvalue())
    onnx.helper.set_model_props(
        graph, {CARD_NAME: _card_text(card, None), "class_names": json.dumps(list(card["class_names"]))}
    )
    return graph.SerializeToString()


# ------------------------------------------------------------------------------------------------ card

#: An absolute path (two or more components): the card names files, never where they lie on the server.
_ABSOLUTE = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s/\\()\[\],;]+[/\\])+([^\s/\\()\[\],;]+)")


def _no_paths(text: str) -> str:
    return _ABSOLUTE.sub(r"\1", text)


def _interval(rate: stats.RateInterval) -> dict[str, float | int]:
    return {"estimate": rate.estimate, "ci_low": rate.low, "ci_high": rate.high, "n_resamples": rate.n_resamples}


def strict(value):
    """``value`` (a card) with every non-finite float (a 0/0 rate and its interval) replaced by None: strict JSON
    (:data:`NULL_MEANING`)."""
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _operating_point(fitted: DeployedDetector) -> dict:
    """The card's operating point: where the threshold comes from and what it does on the evaluation split."""
    setting = fitted.setting
    evaluation = {
        "samples": fitted.n_eval,
        "confidence": 0.95,
        **{name: _interval(rate) for name, rate in fitted.evaluation.items()},
    }
    if not any(rate.n_resamples for rate in fitted.evaluation.values()):
        evaluation["intervals"] = "none: no bootstrap resample was asked for (--bootstrap 0), so no interval is given"
    positives = "correctly classified samples (TPR: correct ones accepted; FPR: errors accepted)"
    g = fitted.guarantee
    if g is not None:
        return {
            "target": f"guaranteed risk: {g.guarantee_words()}",
            "chosen_on": f"calibration split ({g.n_calibration} samples: the held-out samples (not the tuning split) "
            f"cut in two at random with seed {setting.seed}, not stratified; the other part is the evaluation split)",
            "guarantee": {
                "statement": f"with probability at least {1 - g.delta:g} over the calibration draw, the error rate "
                f"among the predictions this detector accepts is at most {g.target_risk:g} on future data drawn "
                "like the calibration split",
                "risk": g.target_risk,
                "delta": g.delta,
                "confidence": 1 - g.delta,
                "n_calibration": g.n_calibration,
                "calibration": {
                    "accepted": g.n_accepted,
                    "errors": g.n_errors,
                    "coverage": g.coverage,
                    "risk": g.risk,
                    "clopper_pearson_upper_bound": g.bound,
                },
                "method": risk_control.METHOD,
                "assumptions": risk_control.ASSUMPTIONS,
            },
            "evaluation": evaluation,
            "positives": positives,
            "versus_explore": "Explore's guaranteed-risk mode certifies the same way on the same calibration split "
            "(its scores of identical logits made equal, so a threshold can differ in the last digits)",
        }
    return {
        "target": setting.target_words(),
        "fpr95_positives": setting.fpr_positive,
        "chosen_on": f"tuning split ({fitted.n_tune} samples: fraction {setting.tune_fraction:g}, seed "
        f"{setting.seed}, stratified by correctness)",
        "tuning": {"tpr": fitted.tuning.tpr, "fpr": fitted.tuning.fpr, "coverage": fitted.tuning.coverage},
        "evaluation": evaluation,
        "positives": positives,
        "versus_explore": "Explore's operating point is placed on the evaluation split itself (it reports the "
        "curve at that TPR); this threshold comes from the tuning split, so its evaluation TPR may miss the "
        "target: what a deployed threshold does. No guarantee: for one, export at a guaranteed risk (--risk)",
    }


def _provenance(run) -> dict[str, str]:
    """The run's provenance as the card gives it (``report.provenance``): no absolute path, no time."""
    return {
        k: _no_paths(str(v))
        for k, v in report.provenance(run).items()
        if not k.startswith("version:") and k not in ("data set source", "generated")
    }


def card(run, fitted: DeployedDetector, files: dict[str, str], not_written: dict[str, str] | None = None) -> dict:
    """The JSON card of ``fitted`` exported as ``files`` (file name -> "logits" or "images"): settings, the run's
    provenance (no absolute paths), the operating point (chosen on the tuning split, or certified on a
    calibration split at a guaranteed risk; TPR, FPR, coverage and risk on the evaluation split with 95 %
    bootstrap intervals), the package versions; ``not_written``: files asked for that could not be written, with
    why. Strict JSON: non-finite numbers are null (:data:`NULL_MEANING`)."""
    detector, setting = fitted.detector, fitted.setting
    versions = report.package_versions()
    for name in CARD_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    accept = (
        f"bool (N,): uncertainty <= {fitted.accept_up_to!r}, the threshold ({fitted.threshold!r}) and the tie rule: "
        f"a row up to {fitted.tie_slack:.3g} above it counts as on it and is accepted (a batch's matrix products "
        "round a row's score by a few ulps, differently in a batch of 1 and of 1,000: on the threshold, the same "
        "decision in any batch; no row of the run lies in that slack)"
    )
    if fitted.guarantee is not None:
        accept += f", the threshold certified for {fitted.guarantee.guarantee_words()}"
    described = {
        "detector": {
            "key": detector.key,
            "name": detector.name,
            "temperature": detector.temperature,
            **({"lambda": detector.lam_, "lambda_setting": setting.lam_words()} if detector.key == "relu" else {}),
            **({"hamming_fallback": bool(detector.fallback_)} if detector.key == "relu" else {}),
        },
        "class_names": list(fitted.class_names),
        "files": files,
        "formats": {name: FORMATS.get(_suffix(name), "") for name in files},
        **({"not_written": dict(not_written)} if not_written else {}),
        "inputs": {  # images only where an images-in file was written (a logits-only run has no normalisation)
            "logits": "float32 (N, C) logits of the run's classifier, classes in class_names order",
            **(
                {
                    "images": f"uint8 (N, H, W, C) images, normalised inside as (x/255 − mean)/std, mean "
                    f"{list(run.mean)}, std {list(run.std)}"
                }
                if "images" in files.values()
                else {}
            ),
        },
        "input_preprocessing": (
            "none: the detector scores the classifier's clean outputs (ε = 0). Input pre-processing (ε) takes a "
            "gradient step through the classifier on every input, which an exported detector cannot do"
        ),
        "outputs": {
            "prediction": "int64 (N,): argmax of the logits",
            "uncertainty": "float64 (N,): higher = more likely misclassified",
            "accept": accept,
        },
        "threshold": fitted.threshold,
        "operating_point": _operating_point(fitted),
        "null": NULL_MEANING,
        "run": _provenance(run),
        "versions": versions,
    }
    return strict(described)


#: Keys every card has (:func:`card`): with ``files`` naming the file, what tells a card from a user's own JSON.
CARD_KEYS = frozenset({"detector", "class_names", "files", "inputs", "outputs", "threshold", "operating_point", "run"})


def is_card_of(found: object, name: str) -> bool:
    """Whether ``found`` (a parsed JSON file) is a card of the file ``name``, written by :func:`card`: an object
    with every key of :data:`CARD_KEYS` whose ``files`` maps ``name`` to what it takes. Anything else (a user's
    own JSON of any shape: ``{"files": 5}``, ``{"files": "name"}``, a list) is not, and is never replaced."""
    if not isinstance(found, dict) or not CARD_KEYS <= found.keys():
        return False
    files = found["files"]
    return isinstance(files, dict) and files.get(name) in INPUTS


def _suffix(name: str) -> str:
    return name[name.rfind(".") :].lower() if "." in name else ""


def export(run, fitted: DeployedDetector, suffix: str, inputs: str = "logits", files: dict | None = None) -> bytes:
    """The detector as one file: an ExportedProgram (``suffix`` ".pt2"), ONNX (".onnx") or legacy TorchScript
    (".pt"), taking ``inputs``; its card names ``files`` (default: this one file, ``detector<suffix>``).
    InputError (one line) for what cannot be written: e.g. the images-in detector of an ONNX run, or the .pt2 of
    a TorchScript model's images-in detector."""
    if suffix not in SUFFIXES:
        raise InputError(f"a detector is written as {', '.join(SUFFIXES)}, not {suffix or '(no suffix)'!r}")
    if suffix == ".onnx":
        extras.require("onnx", ONNX_PURPOSE)  # before any work
    return export_with_card(run, fitted, suffix, inputs, files or {f"detector{suffix}": inputs})


def export_zip(run, fitted: DeployedDetector) -> bytes:
    """Every form of the detector in one ZIP: logits in (``detector.onnx``, ``detector.pt2``), images in when the
    run has a PyTorch model (``detector_images.onnx``, ``.pt2``; for a TorchScript model, which torch.export cannot
    capture, ``detector_images.pt``, legacy TorchScript, and the card says why), and the card
    (``detector.json``). Without the [onnx] extra the ONNX files are left out and the card says why."""
    kinds = ["logits"] + (["images"] if run.model is not None and run.images is not None else [])
    names: dict[str, tuple[str, str]] = {}
    not_written: dict[str, str] = {}
    try:
        extras.require("onnx", ONNX_PURPOSE)
        no_onnx = ""
    except InputError as exc:  # a plain `pip install .`: the ZIP holds the .pt2 and says why there is no .onnx
        no_onnx = str(exc)
    for kind in kinds:
        stem = "detector" if kind == "logits" else "detector_images"
        for suffix in ZIP_SUFFIXES:
            if suffix == ".onnx" and no_onnx:
                not_written[f"{stem}.onnx"] = no_onnx
            elif suffix == ".pt2" and kind == "images" and is_torchscript(run.model):
                not_written[f"{stem}.pt2"] = NO_PT2_FOR_TORCHSCRIPT
                names[f"{stem}.pt"] = (kind, ".pt")
            else:
                names[f"{stem}{suffix}"] = (kind, suffix)
    files = {name: kind for name, (kind, _) in names.items()}
    content: dict[str, str | bytes] = {
        name: export_with_card(run, fitted, suffix, kind, files, not_written) for name, (kind, suffix) in names.items()
    }
    content[CARD_NAME] = _card_text(card(run, fitted, files, not_written))
    return report.data_zip(content)


def export_with_card(
    run, fitted: DeployedDetector, suffix: str, inputs: str, files: dict, not_written: dict | None = None
) -> bytes:
    """:func:`export`, the card inside naming ``files`` and ``not_written``."""
    module, example = module_for(run, fitted, inputs)
    described = card(run, fitted, files, not_written)
    if suffix == ".pt2":
        return pt2_bytes(module, example, described)
    if suffix == ".pt":
        return torchscript_bytes(module, example, described)
    return onnx_bytes(module, example, described, inputs)
