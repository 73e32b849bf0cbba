"""Checkpoint loading: state dicts (``torch.load(..., weights_only=True)`` or safetensors only, never full
unpickling), TorchScript archives, the Rel-U authors' Hub checkpoints, and the content hash of weights.

Checkpoints are read from memory: an upload's bytes go straight in (:func:`load_model_bytes`), and a file is
read into bytes first (:func:`load_model_file`, :func:`load_state_dict_file`), so both take one path."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import torch
from torch import nn

from relu_core import paths
from relu_core.errors import InputError, one_line
from relu_core.models.registry import (
    HUB_MODELS,
    MODELS,
    ModelSpec,
    build_model,
    get_spec,
)

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".th", ".safetensors")


class CheckpointError(InputError):
    """A weights file that cannot be read, or that does not fit the chosen architecture."""


def _torch_load_reason(exc: BaseException) -> str:
    """The specific part of a ``torch.load`` error (its boilerplate suggests ``weights_only=False``: never do that).

    A pickled Python object (a whole ``nn.Module`` saved with ``torch.save(model)``, or anything hostile) is
    named, with what to upload instead."""
    upload_instead = "upload the weights alone (torch.save(model.state_dict(), ...)) or a TorchScript file"
    refused = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
    if refused:
        return (
            f"it holds a pickled Python object (GLOBAL {refused.group(1)}), which is never unpickled here: "
            + upload_instead
        )
    operand = re.search(r"Unsupported operand (\d+)", str(exc))
    if operand:  # e.g. 149 (FRAME): a plain pickle.dump of protocol 4 or more, which torch.save never writes
        return (
            f"it is a plain pickle, not a file torch.save writes (its pickle opcode {operand.group(1)} is refused), "
            "and is never unpickled here: " + upload_instead
        )
    boilerplate = ("Weights only load failed", "Check the documentation", "Please file an issue")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", str(exc)) if p.strip()]
    details = [p for p in paragraphs if not p.startswith(boilerplate)]
    return one_line(details[0]) if details else one_line(exc)


def _preview(keys: list[str], shown: int = 5) -> str:
    head = ", ".join(keys[:shown])
    return f"{head}, ... ({len(keys)} in all)" if len(keys) > shown else head


def _unwrap(obj: object) -> object:
    """Peel ``{"state_dict": ...}`` / ``{"model": ...}`` training-checkpoint wrappers, however nested."""
    while isinstance(obj, Mapping):
        inner = next((obj[k] for k in ("state_dict", "model") if isinstance(obj.get(k), Mapping)), None)
        if inner is None:
            return obj
        obj = inner
    return obj


def _checked_suffix(name: str) -> str:
    """The checkpoint type that ``name``'s suffix gives (lower case); CheckpointError for any other."""
    suffix = Path(name).suffix.lower()
    if suffix not in CHECKPOINT_SUFFIXES:
        raise CheckpointError(
            f"{name}: unsupported checkpoint type {suffix or '(no extension)'!r}; "
            f"use one of {', '.join(CHECKPOINT_SUFFIXES)}"
        )
    return suffix


def file_bytes(path: Path) -> bytes:
    """The bytes of a checkpoint file (the loaders read checkpoints from memory, uploads and files alike)."""
    if not path.is_file():
        what = (
            "is a folder, not a file"
            if path.is_dir()
            else "is not a regular file"
            if path.exists()
            else "does not exist"
        )
        raise CheckpointError(f"checkpoint {path} {what}")
    return path.read_bytes()


def _content(source: bytes | BinaryIO) -> bytes:
    """A checkpoint's bytes, given as such or as a binary file object (read from where it stands)."""
    return source if isinstance(source, bytes) else source.read()


def _read_state_dict(data: bytes, name: str) -> dict[str, torch.Tensor]:
    """The tensors of the state-dict checkpoint ``name`` held in ``data``, on CPU, wrappers and ``module.``
    prefixes removed (the suffix of ``name`` tells a safetensors file from a ``torch.save`` one)."""
    if _checked_suffix(name) == ".safetensors":
        from safetensors.torch import load

        try:
            obj: object = load(data)
        except Exception as exc:  # safetensors raises its own error types for every malformed header
            raise CheckpointError(f"{name} is not a valid safetensors checkpoint: {one_line(exc)}") from None
    elif _is_torchscript(data):
        raise CheckpointError(
            f"{name} is not a valid state-dict checkpoint: it is a TorchScript model (load it without an architecture)"
        )
    else:
        try:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as exc:  # a non-pickle, a truncated zip, or a pickle with globals weights_only refuses
            raise CheckpointError(f"{name} is not a valid PyTorch checkpoint: {_torch_load_reason(exc)}") from None
    obj = _unwrap(obj)
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointError(
            f"{name} is not a valid state-dict checkpoint: expected a mapping of names to tensors, "
            f"found {type(obj).__name__}{' (empty)' if isinstance(obj, Mapping) else ''}"
        )
    not_tensors = [str(k) for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise CheckpointError(
            f"{name} is not a valid state-dict checkpoint: entries that are not named tensors: {_preview(not_tensors)}"
        )
    return {k.removeprefix("module."): v for k, v in obj.items()}


def _outputs(state: Mapping[str, torch.Tensor]) -> int | None:
    """The output size of a state dict's last weight matrix (its classifier), if it has one."""
    weights = [t for k, t in state.items() if k.endswith("weight") and getattr(t, "ndim", 0) == 2]
    return int(weights[-1].shape[0]) if weights else None


def _shapes(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(t.shape) for k, t in state.items() if not k.endswith("num_batches_tracked")}


def _fitting_architectures(state: Mapping[str, torch.Tensor]) -> list[str]:
    """The registered architectures whose parameters have exactly these names and shapes (each built with the
    state's output size on the meta device: nothing allocated)."""
    n_out = _outputs(state)
    if n_out is None:
        return []
    wanted = _shapes(state)
    with torch.device("meta"):
        return [name for name in MODELS if _shapes(build_model(name, n_out).state_dict()) == wanted]


def architectures_for(source: bytes | BinaryIO, name: str) -> list[str]:
    """The registered architectures a state-dict checkpoint fits (to preselect one for an upload); empty for
    TorchScript (it needs none) and for a file that is not a readable state dict (loading it says why)."""
    data = _content(source)
    if _is_torchscript(data):
        return []
    try:
        return _fitting_architectures(_read_state_dict(data, name))
    except InputError:
        return []


def _fit_hint(model: nn.Module, state: Mapping[str, torch.Tensor]) -> str:
    """What a user can do about weights that do not fit ``model`` ("" when nothing is known): the data set's
    class count differs from the checkpoint's outputs, or another registered architecture takes these weights
    (compared by names and shapes on the meta device: nothing is allocated)."""
    chosen_state = model.state_dict()
    n_out, n_classes = _outputs(state), _outputs(chosen_state)
    if n_out is None or n_classes is None:
        return ""
    chosen = _shapes(chosen_state)
    fitting = _fitting_architectures(state)
    with torch.device("meta"):
        same_architecture = any(_shapes(build_model(name, n_classes).state_dict()) == chosen for name in fitting)
    if same_architecture and n_out != n_classes:
        return f"the checkpoint has {n_out} outputs but the data set has {n_classes} classes"
    if fitting:
        return f"these weights fit {' or '.join(fitting)}: choose it as the architecture"
    return ""


def _apply_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> nn.Module:
    """Strictly load ``state``; every mismatch is reported in one line before anything is copied.

    BatchNorm's ``num_batches_tracked`` counters may be absent (checkpoints from PyTorch < 0.4.1, such as
    the akamaster ResNets): they are not weights, and PyTorch itself fills them in for such files.
    """
    expected = model.state_dict()
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    mismatched = [
        f"{k} {tuple(state[k].shape)} in file vs {tuple(expected[k].shape)} in model"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ]
    problems = [
        f"{label} ({len(keys)}): {_preview(keys)}"
        for label, keys in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches", mismatched),
        )
        if keys
    ]
    if problems:  # what to do first (the UI shows a line's start), then the details
        hint = _fit_hint(model, state)
        raise CheckpointError(
            f"{source} does not fit {type(model).__name__}: "
            + (f"{hint} (" if hint else "")
            + "; ".join(problems)
            + (")" if hint else "")
        )
    check_weights(state.items(), source)
    try:
        model.load_state_dict(dict(state), strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: {one_line(exc)}") from None
    return model


def check_weights(named_tensors, source: str) -> None:
    """CheckpointError naming the tensors a model cannot compute with: on no real device (meta), in a sparse or
    other non-dense layout, complex (loading would silently drop the imaginary part), or holding NaN or
    infinite values. The storage is checked first: finiteness cannot even be asked of a meta or sparse tensor."""
    named_tensors = list(named_tensors)
    for problem, is_bad in (
        ("tensors without data (meta tensors)", lambda t: t.is_meta),
        ("sparse or other non-dense tensors", lambda t: t.layout != torch.strided),
        ("complex tensors", lambda t: t.is_complex()),
        ("NaN or infinite weights", lambda t: t.is_floating_point() and not bool(torch.isfinite(t).all())),
    ):
        bad = [name for name, tensor in named_tensors if is_bad(tensor)]
        if bad:
            raise CheckpointError(f"{source} holds {problem} in {_preview(bad)}")


def load_state_dict_file(model: nn.Module, path: str | Path) -> nn.Module:
    """Load the state dict in ``path`` (``.pt .pth .th .safetensors``) into ``model`` strictly, and return it.

    ``.pt/.pth/.th`` are read with ``torch.load(path, map_location="cpu", weights_only=True)`` only (a pickle
    that would run code is refused). ``{"state_dict": ...}`` / ``{"model": ...}`` wrappers and the
    ``module.`` prefix of ``DataParallel`` are removed. Raises ``CheckpointError`` naming the missing and
    unexpected keys and the shape mismatches, or saying the file is not a checkpoint at all.
    """
    path = Path(path)
    _checked_suffix(path.name)  # a file of another kind is named as such, whether it exists or not
    return _apply_state_dict(model, _read_state_dict(file_bytes(path), path.name), path.name)


def _is_torchscript(data: bytes) -> bool:
    """TorchScript archives are zips holding ``code/`` and ``constants.pkl``; ``torch.save`` zips hold neither."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return False
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return any(n.endswith("/constants.pkl") or "/code/" in n for n in archive.namelist())


def _final_layer_key(spec: ModelSpec) -> str:
    """Name of the weight of the architecture's last linear layer (found on a meta-device copy, no memory)."""
    with torch.device("meta"):
        probe = spec.builder(num_classes=2, in_channels=spec.in_channels)
    head = [name for name, module in probe.named_modules() if isinstance(module, nn.Linear)][-1]
    return f"{head}.weight"


def load_model_file(path: str | Path, arch: str | None = None, num_classes: int | None = None) -> nn.Module:
    """A model in eval mode from a TorchScript file, or from a state dict for architecture ``arch``
    (:func:`load_model_bytes` on the file's bytes)."""
    path = Path(path)
    return load_model_bytes(file_bytes(path), path.name, arch, num_classes)


def load_model_bytes(
    source: bytes | BinaryIO, name: str, arch: str | None = None, num_classes: int | None = None
) -> nn.Module:
    """A model in eval mode from a checkpoint held in memory (an upload: its bytes or a binary file object), no
    file written: a TorchScript archive, or a state dict for architecture ``arch``.

    ``name`` is the checkpoint's file name: its suffix tells a safetensors state dict from a ``torch.save``
    one, and every message names it. For a state dict, ``num_classes`` defaults to the output size of the
    checkpoint's final layer.
    """
    data = _content(source)
    if _is_torchscript(data):
        try:
            scripted = torch.jit.load(io.BytesIO(data), map_location="cpu").eval()
        except Exception as exc:  # a damaged archive surfaces as several error types
            raise CheckpointError(f"{name} is not a valid TorchScript model: {one_line(exc)}") from None
        if not hasattr(scripted, "forward"):  # a module scripted for its other methods only
            raise CheckpointError(f"{name} is a TorchScript module without a forward method: it cannot predict")
        check_weights([*scripted.named_parameters(), *scripted.named_buffers()], name)
        return scripted
    if arch is None:
        raise CheckpointError(
            f"{name} holds a state dict, not a TorchScript model: choose its architecture ({', '.join(MODELS)})"
        )
    spec = get_spec(arch)
    state = _read_state_dict(data, name)
    if num_classes is None:
        key = _final_layer_key(spec)
        if key not in state or state[key].ndim != 2:
            raise CheckpointError(f"{name} does not fit {arch}: no final layer weight {key!r} in the file")
        num_classes = int(state[key].shape[0])
    model = build_model(arch, num_classes)
    return _apply_state_dict(model, state, name).eval()


def load_hub_model(repo_id: str) -> nn.Module:
    """A pretrained model from the Hugging Face Hub, in eval mode (needs the internet on first use).

    The authors' checkpoints (``HUB_MODELS``) are built here with the matching architecture and their
    ``pytorch_model.bin`` is downloaded once into ``cache_dir("hub")`` and loaded with ``weights_only=True``:
    timm cannot build them from the Hub alone, since their CIFAR stem is set in the authors' code. Any other
    repository goes through ``timm.create_model("hf_hub:" + repo_id, pretrained=True)`` (timm is optional).
    Raises InputError when offline, when timm is missing, or when the repository is not a model.
    """
    entry = HUB_MODELS.get(repo_id)
    if entry is not None:
        target = paths.cache_dir("hub") / f"{repo_id.replace('/', '--')}.pth"
        if not target.is_file():
            url = f"https://huggingface.co/{repo_id}/resolve/main/pytorch_model.bin"
            try:
                torch.hub.download_url_to_file(url, str(target), progress=False)
            except Exception as exc:  # URLError, HTTPError, socket and SSL errors all mean "could not fetch"
                raise InputError(
                    f"could not download {repo_id} from the Hugging Face Hub (connect to the internet): {one_line(exc)}"
                ) from None
        return load_state_dict_file(build_model(entry.arch, entry.num_classes), target).eval()
    try:
        import timm
    except ImportError:
        raise InputError(
            f"{repo_id} is not one of the authors' models ({', '.join(HUB_MODELS)}); "
            "for other Hub models install timm (pip install timm) and connect to the internet"
        ) from None
    try:
        model = timm.create_model("hf_hub:" + repo_id, pretrained=True)
    except Exception as exc:  # timm and huggingface_hub raise many types for offline / unknown repositories
        raise InputError(
            f"could not load {repo_id} through timm (offline, or not a timm model?): {one_line(exc)}"
        ) from None
    return model.eval()


#: The suffix TorchScript gives a type it has seen before (``__torch__.___torch_mangle_7.Net``): a copy of a
#: module (``copy.deepcopy``) or a re-script gets a new one, which says nothing of what it computes.
_TORCH_MANGLE = re.compile(r"___torch_mangle_\d+\.?")
_SELF_ATTRIBUTE = re.compile(r"\bself\.(\w+)")


def _hash_tensor(digest, name: str, tensor: torch.Tensor) -> None:
    data = tensor.detach().to("cpu").contiguous()
    digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}\n".encode())
    digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())


def _hash_torchscript(digest, model: torch.jit.ScriptModule) -> None:
    """Each submodule (by name): its type's original name, its code (mangled type suffixes left out), its code's
    tensor constants and the attributes its code reads that are neither submodules nor tensors of the state dict
    (``self.scale``: a float set when it was scripted)."""
    for name, module in sorted(model.named_modules(), key=lambda item: item[0]):
        try:
            code, constants = module.code_with_constants
        except (RuntimeError, AttributeError):  # a container without a forward of its own
            code, constants = "", None
        original = getattr(module, "original_name", type(module).__name__)
        digest.update(f"module {name}|{original}\n{_TORCH_MANGLE.sub('', code)}\n".encode())
        mapping = getattr(constants, "const_mapping", None) or {}
        for key in sorted(mapping):
            if isinstance(mapping[key], torch.Tensor):
                _hash_tensor(digest, f"{name}|constant {key}", mapping[key])
        own = {n for n, _ in module.named_children()} | set(module.state_dict())
        for attribute in sorted(set(_SELF_ATTRIBUTE.findall(code)) - own):
            try:
                value = module._c.getattr(attribute)
            except (RuntimeError, AttributeError):  # a method, or a name the code only tests
                continue
            if isinstance(value, torch.Tensor):
                _hash_tensor(digest, f"{name}|attribute {attribute}", value)
            else:
                digest.update(f"{name}|attribute {attribute}={_TORCH_MANGLE.sub('', repr(value))}\n".encode())


def weights_hash(model: nn.Module) -> str:
    """SHA-256 (hex) of the state dict: every entry's name, dtype, shape and raw bytes, in name order.

    A TorchScript model is hashed by what defines what it computes besides its tensors, in a stable order: each
    submodule's code, constants and the attributes its code reads (:func:`_hash_torchscript`), then its
    parameters and buffers in name order; not its serialised archive, whose bytes change with a
    ``copy.deepcopy`` (its types are renamed, its pickle memoised otherwise) although nothing it computes does.
    """
    digest = hashlib.sha256()
    if isinstance(model, torch.jit.ScriptModule):
        digest.update(b"torchscript\n")
        _hash_torchscript(digest, model)
    for name, tensor in sorted(model.state_dict().items()):
        _hash_tensor(digest, name, tensor)
    return digest.hexdigest()
