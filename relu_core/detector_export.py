"""A deployable detector: the fitted detector of a run (D*, T, the threshold of an operating point chosen on the
tuning split, the class names) as a TorchScript module and an ONNX graph, with a JSON card.

:func:`fit_deployable` fits the detector on the run's tuning split (the split Explore uses: ``explore.cached``)
and reads the threshold reaching the target TPR or coverage there (``metrics.operating_point``); the accept
decisions it gives on the evaluation split are then counted, with bootstrap intervals
(``stats.acceptance_rates``). :func:`export` writes it as files:

- logits in (float32 (N, C)): ``(prediction, uncertainty, accept)`` out, prediction = argmax, uncertainty the
  library's score (``detectors.softmax`` at T in float64, then the detector's own ``score_probs``: the module is
  traced through the library's functions, so no formula is written twice), accept = uncertainty <= threshold;
- images in (uint8 (N, H, W, C), when the run has a PyTorch model): the run's normalisation and model first.

TorchScript files carry the card as the extra file ``detector.json``, ONNX graphs as the metadata property
``detector.json`` (and ``class_names``). The card holds no server path.
"""

from __future__ import annotations

import copy
import importlib.metadata
import io
import json
import re
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from relu_core import detectors, metrics, report, stats
from relu_core.errors import InputError
from relu_core.explore import cached
from relu_core.explore.setting import Setting
from relu_core.models.normalization import Normalization

#: The detectors that can be exported (those Explore and the paper compare, the learned one first).
EXPORTABLE = ("relu", "doctor", "msp")
SUFFIXES = (".onnx", ".pt")
INPUTS = ("logits", "images")
OUTPUT_NAMES = ("prediction", "uncertainty", "accept")
CARD_NAME = "detector.json"
ONNX_OPSET = 17
#: Packages whose versions the card names besides the report's.
CARD_PACKAGES = ("onnx", "onnxruntime")


@dataclass(frozen=True, eq=False)
class DeployedDetector:
    """A detector fitted on a run's tuning split with the threshold of its operating point there, and what its
    accept decisions give on the evaluation split (``evaluation``: TPR, FPR, coverage and risk with intervals)."""

    detector: detectors.Detector
    setting: Setting
    threshold: float
    class_names: tuple[str, ...]
    n_tune: int
    n_eval: int
    tuning: metrics.OperatingPoint
    evaluation: dict[str, stats.RateInterval]

    @property
    def key(self) -> str:
        return self.detector.key


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
    n_resamples: int = stats.DEFAULT_RESAMPLES,
) -> DeployedDetector:
    """The detector ``key`` (one of :data:`EXPORTABLE`) of ``run`` at T and λ, fitted on the seeded tuning split
    (``tune_fraction``, ``seed``: Explore's split), its threshold the lowest reaching ``op_target`` TPR (or
    coverage) on that split; its accept decisions on the evaluation split with ``n_resamples`` bootstrap
    resamples (seeded with ``seed``). InputError for anything else, or MSP at T ≠ 1 (MSP is defined at T = 1)."""
    setting = Setting(
        temperature=temperature, lam=lam, tune_fraction=tune_fraction, seed=seed, op_kind=op_kind, op_target=op_target
    )
    detector = unfitted(key, setting)
    _, correct = cached.correctness(run)
    tune_idx, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    probs = cached.probs_at(run, detector.temperature)
    detector.fit_probs(probs[tune_idx], correct[tune_idx])
    uncertainty = detector.score_probs(probs)
    tuning = metrics.operating_point(uncertainty[tune_idx], correct[tune_idx], setting.op_kind, setting.op_target)
    accepted = uncertainty[eval_idx] <= tuning.threshold
    evaluation = stats.acceptance_rates(accepted, correct[eval_idx], n_resamples=n_resamples, seed=setting.seed)
    return DeployedDetector(
        detector, setting, tuning.threshold, tuple(run.class_names), tune_idx.size, eval_idx.size, tuning, evaluation
    )


def from_setting(run, setting: Setting, key: str = "relu") -> DeployedDetector:
    """:func:`fit_deployable` at an Explore ``setting`` (its T, λ, split and operating point; Rel-U by default)."""
    return fit_deployable(
        run,
        key,
        temperature=setting.temperature,
        lam=setting.lam,
        tune_fraction=setting.tune_fraction,
        seed=setting.seed,
        op_kind=setting.op_kind,
        op_target=setting.op_target,
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
        return logits.argmax(dim=1), uncertainty, uncertainty <= self.fitted.threshold


class ImageDetector(nn.Module):
    """uint8 images (N, H, W, C) in: the run's normalisation and model, then :class:`LogitsDetector`."""

    def __init__(self, model: nn.Module, normalization: Normalization, head: LogitsDetector) -> None:
        super().__init__()
        with torch.no_grad():  # a copy without gradients: the exported outputs are plain tensors
            self.model = copy.deepcopy(model).eval().requires_grad_(False)
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
        warnings.simplefilter("ignore")  # TracerWarning: those very checks
        return torch.jit.trace(module.eval(), example, check_trace=False)


def torchscript_bytes(module: nn.Module, example: torch.Tensor, card: dict) -> bytes:
    """The traced ``module`` as a TorchScript archive, ``card`` inside as the extra file ``detector.json``."""
    buffer = io.BytesIO()
    traced = _traced(module, example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.save is deprecated": still the TorchScript format
        torch.jit.save(traced, buffer, _extra_files={CARD_NAME: json.dumps(card, indent=2)})
    return buffer.getvalue()


def onnx_bytes(module: nn.Module, example: torch.Tensor, card: dict, input_name: str) -> bytes:
    """``module`` as an ONNX graph (opset :data:`ONNX_OPSET`, any batch size), ``card`` and the class names in
    its metadata."""
    import onnx

    buffer = io.BytesIO()
    axes = {name: {0: "n"} for name in (input_name, *OUTPUT_NAMES)}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # the TorchScript-based exporter: torch.export refuses the library's value checks (data-dependent)
        torch.onnx.export(
            module.eval(),
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
        graph, {CARD_NAME: json.dumps(card), "class_names": json.dumps(list(card["class_names"]))}
    )
    return graph.SerializeToString()


# ------------------------------------------------------------------------------------------------ card

#: An absolute path (two or more components): the card names files, never where they lie on the server.
_ABSOLUTE = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s/\\()\[\],;]+[/\\])+([^\s/\\()\[\],;]+)")


def _no_paths(text: str) -> str:
    return _ABSOLUTE.sub(r"\1", text)


def _interval(rate: stats.RateInterval) -> dict[str, float | int]:
    return {"estimate": rate.estimate, "ci_low": rate.low, "ci_high": rate.high, "n_resamples": rate.n_resamples}


def card(run, fitted: DeployedDetector, files: dict[str, str]) -> dict:
    """The JSON card of ``fitted`` exported as ``files`` (file name -> "logits" or "images"): settings, the run's
    provenance (no absolute paths), the operating point (chosen on the tuning split; TPR, FPR, coverage and risk
    on the evaluation split with 95 % bootstrap intervals) and the package versions."""
    detector, setting = fitted.detector, fitted.setting
    provenance = {
        k: _no_paths(str(v))
        for k, v in report.provenance(run).items()
        if not k.startswith("version:") and k not in ("data set source", "generated")
    }
    versions = report.package_versions()
    for name in CARD_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    op_words = "TPR" if setting.op_kind == "tpr" else "coverage"
    return {
        "detector": {
            "key": detector.key,
            "name": detector.name,
            "temperature": detector.temperature,
            **({"lambda": detector.lam_, "lambda_setting": setting.lam_words()} if detector.key == "relu" else {}),
            **({"hamming_fallback": bool(detector.fallback_)} if detector.key == "relu" else {}),
        },
        "class_names": list(fitted.class_names),
        "files": files,
        "inputs": {
            "logits": "float32 (N, C) logits of the run's classifier, classes in class_names order",
            "images": f"uint8 (N, H, W, C) images, normalised inside as (x/255 − mean)/std, mean {list(run.mean)}, "
            f"std {list(run.std)}",
        },
        "input_preprocessing": (
            "none: the detector scores the classifier's clean outputs (ε = 0). Input pre-processing (ε) takes a "
            "gradient step through the classifier on every input, which an exported detector cannot do"
        ),
        "outputs": {
            "prediction": "int64 (N,): argmax of the logits",
            "uncertainty": "float64 (N,): higher = more likely misclassified",
            "accept": f"bool (N,): uncertainty <= threshold ({fitted.threshold!r})",
        },
        "threshold": fitted.threshold,
        "operating_point": {
            "target": f"{op_words} ≥ {setting.op_target:g}",
            "chosen_on": f"tuning split ({fitted.n_tune} samples: fraction {setting.tune_fraction:g}, seed "
            f"{setting.seed}, stratified by correctness)",
            "tuning": {"tpr": fitted.tuning.tpr, "fpr": fitted.tuning.fpr, "coverage": fitted.tuning.coverage},
            "evaluation": {
                "samples": fitted.n_eval,
                "confidence": 0.95,
                **{name: _interval(rate) for name, rate in fitted.evaluation.items()},
            },
            "positives": "correctly classified samples (TPR: correct ones accepted; FPR: errors accepted)",
            "versus_explore": "Explore's operating point is placed on the evaluation split itself (it reports the "
            "curve at that TPR); this threshold comes from the tuning split, so its evaluation TPR may miss the "
            "target: what a deployed threshold does",
        },
        "run": provenance,
        "versions": versions,
    }


def export(run, fitted: DeployedDetector, suffix: str, inputs: str = "logits", files: dict | None = None) -> bytes:
    """The detector as one file: TorchScript (``suffix`` ".pt") or ONNX (".onnx"), taking ``inputs``; its card
    names ``files`` (default: this one file, ``detector<suffix>``)."""
    if suffix not in SUFFIXES:
        raise InputError(f"a detector is written as {' or '.join(SUFFIXES)}, not {suffix or '(no suffix)'!r}")
    module, example = module_for(run, fitted, inputs)
    described = card(run, fitted, files or {f"detector{suffix}": inputs})
    if suffix == ".pt":
        return torchscript_bytes(module, example, described)
    return onnx_bytes(module, example, described, inputs)


def export_zip(run, fitted: DeployedDetector) -> bytes:
    """Every form of the detector in one ZIP: logits in (``detector.onnx``, ``detector.pt``), images in when the
    run has a PyTorch model (``detector_images.onnx``, ``.pt``), and the card (``detector.json``)."""
    kinds = ["logits"] + (["images"] if run.model is not None and run.images is not None else [])
    names = {f"detector{'' if k == 'logits' else '_images'}{s}": (k, s) for k in kinds for s in SUFFIXES}
    files = {name: kind for name, (kind, _) in names.items()}
    content: dict[str, str | bytes] = {
        name: export(run, fitted, suffix, kind, files) for name, (kind, suffix) in names.items()
    }
    content[CARD_NAME] = json.dumps(card(run, fitted, files), indent=2, ensure_ascii=False)
    return report.data_zip(content)
