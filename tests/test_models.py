"""Model zoo: strict loading and accuracy of the real pretrained ResNets, builders, checkpoints, hub, hashing."""

from __future__ import annotations

import io
import os
import pickle
import sys
import types
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from relu_core import models
from relu_core.errors import InputError
from relu_core.models import (
    HUB_MODELS,
    MODELS,
    CheckpointError,
    build_model,
    load_hub_model,
    load_model_bytes,
    load_model_file,
    load_state_dict_file,
    pretrained_weights,
    weights_hash,
)

AKAMASTER = ("resnet20", "resnet32", "resnet44", "resnet56")


@pytest.fixture(scope="module")
def weights_dir(shared_data: Path) -> Path:
    return shared_data / "weights" / "cifar10_resnet_akamaster"


@pytest.fixture(scope="module")
def exact_cifar10(shared_data: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(shared_data / "cifar10" / "cifar10_test_lossless_prefix1017.npz")
    return data["x"], data["y"]


def _perturbed(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Give every float tensor (BatchNorm statistics included) seeded random values, so round trips are telling."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
    return model


# ------------------------------------------------------------------------------------------------ real weights


@pytest.mark.parametrize("name", AKAMASTER)
def test_pretrained_weights_are_found_and_load_strictly(name: str, weights_dir: Path) -> None:
    path = pretrained_weights(name)
    assert path is not None and path.parent == weights_dir and path.name.startswith(f"{name}-")
    model = load_state_dict_file(build_model(name), path)
    saved = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    loaded = model.state_dict()
    for key, value in saved.items():
        assert torch.equal(loaded[key.removeprefix("module.")], value)
    # Every learned tensor of the model came from the file (only BatchNorm's step counters are not stored).
    assert {k for k in loaded if not k.endswith("num_batches_tracked")} == {k.removeprefix("module.") for k in saved}


def test_pretrained_weights_absent_or_unknown() -> None:
    assert pretrained_weights("resnet110") is None
    assert pretrained_weights("cnn8") is None
    with pytest.raises(InputError, match="unknown model"):
        pretrained_weights("resnet1000")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "expected"), [("resnet20", 0.916), ("resnet56", 0.927)])
def test_accuracy_on_exact_cifar10_images(
    name: str, expected: float, exact_cifar10: tuple[np.ndarray, np.ndarray]
) -> None:
    images, labels = exact_cifar10
    spec = MODELS[name]
    model = load_state_dict_file(build_model(name), pretrained_weights(name)).eval()
    mean = torch.tensor(spec.mean).view(1, 3, 1, 1)
    std = torch.tensor(spec.std).view(1, 3, 1, 1)
    x = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0 - mean) / std
    with torch.inference_mode():
        accuracy = (model(x).argmax(1).numpy() == labels).mean()
    assert len(labels) == 1017
    assert abs(accuracy - expected) <= 0.005, accuracy


# ------------------------------------------------------------------------------------------------ builders


@pytest.mark.parametrize("name", list(MODELS))
def test_builder_output_shape(name: str) -> None:
    spec = MODELS[name]
    model = build_model(name, num_classes=7).eval()
    with torch.no_grad():
        out = model(torch.zeros(2, spec.in_channels, spec.input_size, spec.input_size))
    assert out.shape == (2, 7)
    assert spec.name == name and len(spec.mean) == len(spec.std) == spec.in_channels


def test_builder_in_channels_override() -> None:
    model = build_model("resnet20", num_classes=3, in_channels=1).eval()
    assert model(torch.zeros(2, 1, 32, 32)).shape == (2, 3)


def test_paper_variants_have_the_authors_layout() -> None:
    """The authors' checkpoints (timm key names) need these exact stems and heads."""
    resnet = build_model("resnet18_cifar").state_dict()
    assert resnet["conv1.weight"].shape == (64, 3, 3, 3) and resnet["fc.weight"].shape == (10, 512)
    densenet = build_model("densenet121_cifar", num_classes=100).state_dict()
    assert densenet["features.conv0.weight"].shape == (24, 3, 3, 3)
    assert not any(k.startswith("features.norm0.") for k in densenet)
    assert densenet["classifier.weight"].shape == (100, 384)
    assert {h.arch for h in HUB_MODELS.values()} <= set(MODELS)


def test_build_model_rejects_bad_arguments() -> None:
    with pytest.raises(InputError, match="unknown model 'vgg'"):
        build_model("vgg")
    with pytest.raises(InputError, match="num_classes"):
        build_model("cnn8", num_classes=0)
    with pytest.raises(InputError, match="in_channels"):
        build_model("cnn8", in_channels=0)


# ------------------------------------------------------------------------------------------------ checkpoints


def test_round_trip_pt_with_wrapper_and_module_prefix(tmp_path: Path) -> None:
    source = _perturbed(build_model("resnet20"))
    path = tmp_path / "wrapped.pth"
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in source.state_dict().items()}}, path)
    target = load_state_dict_file(build_model("resnet20"), path)
    assert weights_hash(target) == weights_hash(source)


def test_round_trip_model_key_and_safetensors(tmp_path: Path) -> None:
    source = _perturbed(build_model("cnn32"))
    torch.save({"model": source.state_dict()}, tmp_path / "a.pt")
    save_file(source.state_dict(), str(tmp_path / "a.safetensors"))
    for name in ("a.pt", "a.safetensors"):
        assert weights_hash(load_state_dict_file(build_model("cnn32"), tmp_path / name)) == weights_hash(source)


def test_missing_and_unexpected_keys_are_named(tmp_path: Path) -> None:
    state = build_model("resnet20").state_dict()
    del state["linear.bias"]
    state["extra.weight"] = torch.zeros(3)
    path = tmp_path / "bad.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointError) as info:
        load_state_dict_file(build_model("resnet20"), path)
    message = str(info.value)
    assert "missing keys (1): linear.bias" in message and "unexpected keys (1): extra.weight" in message
    assert "\n" not in message


def test_many_missing_keys_are_summarised(tmp_path: Path) -> None:
    path = tmp_path / "cnn.pt"
    torch.save(build_model("cnn8").state_dict(), path)
    with pytest.raises(CheckpointError, match=r"missing keys \(\d+\): conv1.weight, .*\.\.\. \(\d+ in all\)"):
        load_state_dict_file(build_model("resnet20"), path)


def test_shape_mismatch_is_named(tmp_path: Path) -> None:
    path = tmp_path / "hundred.th"
    torch.save(build_model("resnet20", num_classes=100).state_dict(), path)
    with pytest.raises(
        CheckpointError, match=r"shape mismatches \(2\): linear.weight \(100, 64\) in file vs \(10, 64\)"
    ):
        load_state_dict_file(build_model("resnet20"), path)


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".th", ".safetensors"])
def test_random_bytes_are_not_a_checkpoint(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"noise{suffix}"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(CheckpointError, match=f"noise{suffix} is not a valid"):
        load_state_dict_file(build_model("cnn8"), path)


def test_text_file_and_non_state_dict_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.pth").write_text("these are not weights\n")
    with pytest.raises(CheckpointError, match="notes.pth is not a valid PyTorch checkpoint"):
        load_state_dict_file(build_model("cnn8"), tmp_path / "notes.pth")
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="list.pt is not a valid state-dict checkpoint"):
        load_state_dict_file(build_model("cnn8"), tmp_path / "list.pt")
    torch.save({"weight": torch.zeros(1), "step": 3}, tmp_path / "mixed.pt")
    with pytest.raises(CheckpointError, match="not named tensors: step"):
        load_state_dict_file(build_model("cnn8"), tmp_path / "mixed.pt")


def test_unsupported_extension_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="unsupported checkpoint type '.onnx'"):
        load_state_dict_file(build_model("cnn8"), tmp_path / "model.onnx")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_state_dict_file(build_model("cnn8"), tmp_path / "absent.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model_file(tmp_path / "absent.pt", arch="cnn8")


class _Payload:
    """Unpickling this would run a shell command that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_hostile_pickle_is_refused_without_running(tmp_path: Path, writer: str) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "hostile.pt"
    if writer == "pickle":
        path.write_bytes(pickle.dumps({"state_dict": _Payload(marker)}))
    else:
        torch.save({"state_dict": _Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="hostile.pt is not a valid PyTorch checkpoint: ") as info:
        load_state_dict_file(build_model("cnn8"), path)
    if writer == "torch.save":  # the reason names the refused callable, and never suggests weights_only=False
        assert "GLOBAL" in str(info.value) and "system" in str(info.value)
    assert "weights_only" not in str(info.value)
    with pytest.raises(CheckpointError, match="is not a valid PyTorch checkpoint"):
        load_model_file(path, arch="cnn8")
    assert not marker.exists()


def test_torchscript_file_loads_without_architecture(tmp_path: Path) -> None:
    model = _perturbed(build_model("cnn8")).eval()
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(model), str(path))
    loaded = load_model_file(path)
    x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    assert not loaded.training
    with pytest.raises(CheckpointError, match="scripted.pt is not a valid state-dict checkpoint: it is a TorchScript"):
        load_state_dict_file(build_model("cnn8"), path)


def test_state_dict_file_infers_class_count(tmp_path: Path) -> None:
    source = _perturbed(build_model("resnet20", num_classes=100))
    path = tmp_path / "r20_c100.pt"
    torch.save(source.state_dict(), path)
    with pytest.raises(CheckpointError, match="choose its architecture"):
        load_model_file(path)
    model = load_model_file(path, arch="resnet20")
    assert model.linear.out_features == 100 and not model.training
    assert weights_hash(model) == weights_hash(source)
    with pytest.raises(CheckpointError, match="shape mismatches"):
        load_model_file(path, arch="resnet20", num_classes=10)
    with pytest.raises(CheckpointError, match="no final layer weight 'classifier.weight'"):
        load_model_file(path, arch="cnn8")


def test_checkpoints_load_from_bytes_and_file_objects_as_from_files(tmp_path: Path) -> None:
    source = _perturbed(build_model("resnet20", num_classes=100))
    torch.save({"state_dict": source.state_dict()}, tmp_path / "r20.pth")
    save_file(source.state_dict(), str(tmp_path / "r20.safetensors"))
    torch.jit.save(torch.jit.script(source.eval()), str(tmp_path / "r20_scripted.pt"))
    for name in ("r20.pth", "r20.safetensors", "r20_scripted.pt"):
        data = (tmp_path / name).read_bytes()
        from_file = weights_hash(load_model_file(tmp_path / name, arch="resnet20"))
        for upload in (data, io.BytesIO(data)):
            model = load_model_bytes(upload, name, arch="resnet20")
            assert weights_hash(model) == from_file and not model.training
        if name != "r20_scripted.pt":  # a scripted model is hashed as its archive
            assert from_file == weights_hash(source)
    data = (tmp_path / "r20.pth").read_bytes()
    with pytest.raises(CheckpointError, match="r20.pth holds a state dict, not a TorchScript model"):
        load_model_bytes(data, "r20.pth")
    with pytest.raises(CheckpointError, match="unsupported checkpoint type '.onnx'"):
        load_model_bytes(data, "r20.onnx", arch="resnet20")
    with pytest.raises(CheckpointError, match="upload.pt is not a valid PyTorch checkpoint"):
        load_model_bytes(b"these are not weights\n", "upload.pt", arch="resnet20")


def test_pickled_module_is_refused_with_what_to_upload_instead() -> None:
    buffer = io.BytesIO()
    torch.save(build_model("cnn8"), buffer)  # the whole module, not its state dict
    with pytest.raises(CheckpointError) as info:
        load_model_bytes(buffer.getvalue(), "whole.pt", arch="cnn8")
    message = str(info.value)
    assert message.startswith("whole.pt is not a valid PyTorch checkpoint: it holds a pickled Python object")
    assert "model.state_dict()" in message and "TorchScript" in message
    assert "weights_only" not in message and "\x1b" not in message and "\n" not in message


def test_a_plain_pickle_is_refused_with_what_to_upload_instead(tmp_path) -> None:
    import pickle

    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (ran.touch, ())

    data = pickle.dumps(Payload(), protocol=4)
    with pytest.raises(CheckpointError) as info:
        load_model_bytes(data, "evil.pt", arch="cnn8")
    message = str(info.value)
    assert message.startswith("evil.pt is not a valid PyTorch checkpoint: it is a plain pickle, not a file torch.save")
    assert "model.state_dict()" in message and "Unsupported operand" not in message and "\n" not in message
    assert not ran.exists()  # never unpickled


@pytest.mark.parametrize(
    "saved, outputs, chosen, classes, hint",
    [
        ("cnn8", 10, "resnet20", 10, "does not fit CifarResNet: these weights fit cnn8: choose it as the architecture"),
        ("resnet20", 10, "resnet32", 10, "these weights fit resnet20: choose it"),
        (
            "cnn32",
            10,
            "cnn32",
            2,
            "does not fit SmallCNN: the checkpoint has 10 outputs but the data set has 2 classes",
        ),
    ],
)
def test_weights_that_do_not_fit_say_what_to_do_first(saved, outputs, chosen, classes, hint) -> None:
    buffer = io.BytesIO()
    torch.save(build_model(saved, outputs).state_dict(), buffer)
    with pytest.raises(CheckpointError) as info:
        load_model_bytes(buffer.getvalue(), "w.pt", arch=chosen, num_classes=classes)
    message = str(info.value)
    assert hint in message and message.index(hint) < 40  # first, where a cut line still shows it


def test_architectures_for_names_what_a_state_dict_fits() -> None:
    from relu_core.models import architectures_for

    for arch, outputs in (("cnn8", 10), ("resnet20", 100)):
        buffer = io.BytesIO()
        torch.save(build_model(arch, outputs).state_dict(), buffer)
        assert architectures_for(buffer.getvalue(), "w.pt") == [arch]
    scripted = io.BytesIO()
    torch.jit.save(torch.jit.script(build_model("cnn8", 10)), scripted)
    assert architectures_for(scripted.getvalue(), "m.pt") == []  # TorchScript needs no architecture
    assert architectures_for(b"not a checkpoint", "x.pt") == []  # loading it says why


def test_one_line_drops_terminal_colour_codes() -> None:
    from relu_core.errors import one_line

    assert one_line(ValueError("do \x1b[1mthis\x1b[0m only\n\tif")) == "do this only if"


def test_hostile_pickle_in_memory_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"state_dict": _Payload(marker)}, buffer)
    for data in (buffer.getvalue(), pickle.dumps({"state_dict": _Payload(marker)})):
        with pytest.raises(CheckpointError, match="hostile.pt is not a valid PyTorch checkpoint: ") as info:
            load_model_bytes(data, "hostile.pt", arch="cnn8")
        assert "weights_only" not in str(info.value)
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------ hub


def test_hub_offline_is_a_clear_input_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))

    def offline(url: str, dst: str, **kwargs: object) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    with pytest.raises(InputError, match="could not download edadaltocg/resnet34_cifar10 .*internet"):
        load_hub_model("edadaltocg/resnet34_cifar10")


def test_hub_model_from_cache_loads_with_the_authors_architecture(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))
    source = _perturbed(build_model("densenet121_cifar", num_classes=100))
    (tmp_path / "hub").mkdir()
    torch.save(source.state_dict(), tmp_path / "hub" / "edadaltocg--densenet121_cifar100.pth")
    monkeypatch.setattr(torch.hub, "download_url_to_file", pytest.fail)  # cached: nothing is downloaded
    model = load_hub_model("edadaltocg/densenet121_cifar100")
    assert weights_hash(model) == weights_hash(source) and not model.training


def test_other_hub_models_need_timm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm -> ImportError
    with pytest.raises(InputError, match="install timm"):
        load_hub_model("someone/some_model")
    fake_timm = types.ModuleType("timm")

    def create_model(name: str, pretrained: bool) -> torch.nn.Module:
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    fake_timm.create_model = create_model
    monkeypatch.setitem(sys.modules, "timm", fake_timm)
    with pytest.raises(InputError, match="could not load someone/some_model through timm .*offline"):
        load_hub_model("someone/some_model")


# ------------------------------------------------------------------------------------------------ hashing


def test_weights_hash_is_stable_and_sensitive() -> None:
    model = _perturbed(build_model("cnn8"))
    twin = _perturbed(build_model("cnn8"))
    digest = weights_hash(model)
    assert digest == weights_hash(model) == weights_hash(twin)
    assert len(digest) == 64 and int(digest, 16) >= 0
    with torch.no_grad():
        twin.classifier.bias[0] += 1e-6
    assert weights_hash(twin) != digest
    twin = _perturbed(build_model("cnn8"))
    twin.features[1].running_var[0] += 1  # buffers count too
    assert weights_hash(twin) != digest
    assert weights_hash(_perturbed(build_model("cnn8"), seed=1)) != digest


class _Affine(torch.nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * self.linear(x)


def test_weights_hash_of_torchscript_includes_its_code_and_constants(tmp_path: Path) -> None:
    one, two = _Affine(1.0), _Affine(2.0)
    two.load_state_dict(one.state_dict())
    assert weights_hash(one) == weights_hash(two)  # plain modules: the architecture is the caller's choice
    for model, name in ((one, "one.pt"), (two, "two.pt")):
        torch.jit.save(torch.jit.script(model), tmp_path / name)
    first = weights_hash(load_model_file(tmp_path / "one.pt"))
    assert weights_hash(load_model_file(tmp_path / "one.pt")) == first
    # Same tensors, another computation: the logits and eps caches must not be shared.
    assert weights_hash(load_model_file(tmp_path / "two.pt")) != first


def test_module_exports_checkpoint_error_as_input_error() -> None:
    assert issubclass(models.CheckpointError, InputError) and issubclass(models.CheckpointError, ValueError)


# ------------------------------------------------------------------------------------------ normalisation, fit


@pytest.mark.parametrize("name", sorted(MODELS))
def test_normalization_travels_with_the_spec_and_matches_torchvision_arithmetic(name: str) -> None:
    spec = MODELS[name]
    assert spec.normalization == models.Normalization(spec.mean, spec.std)
    images = np.random.default_rng(0).integers(0, 256, (3, 5, 4, spec.in_channels), dtype=np.uint8)
    out = spec.normalization.on(torch.device("cpu"))(torch.from_numpy(images))
    mean, std = np.asarray(spec.mean).reshape(1, -1, 1, 1), np.asarray(spec.std).reshape(1, -1, 1, 1)
    expected = (images.transpose(0, 3, 1, 2) / 255.0 - mean) / std  # ToTensor + Normalize, in float64
    assert out.dtype == torch.float32 and out.shape == (3, spec.in_channels, 5, 4)
    assert out.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_hub_models_carry_their_normalization() -> None:
    entry = HUB_MODELS["edadaltocg/resnet18_cifar100"]
    assert entry.normalization == models.Normalization((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))


def test_fitting_models_match_the_data_sets_shapes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert models.fitting_models("digits") == ["cnn8"]
    assert models.fitting_models("fashion-mnist") == ["cnn28"]
    assert models.fitting_models("some-new-set") == ["cnn32"]
    monkeypatch.setenv("RELU_STUDIO_DATA", str(tmp_path))  # no pretrained weights here: the small CNN only
    monkeypatch.setattr(models.registry.paths, "data_dirs", lambda: [tmp_path])
    assert models.fitting_models("cifar10") == ["cnn32"]
    folder = tmp_path / "weights" / "cifar10_resnet_akamaster"
    folder.mkdir(parents=True)
    (folder / "resnet56-abcdef.th").write_bytes(b"")
    assert models.fitting_models("cifar10-exact") == ["resnet56", "cnn32"]
    for dataset, names in models.DATASET_MODELS.items():  # every fitting model reads that set's image shape
        spec = {"digits": (8, 1), "mnist": (28, 1), "fashion-mnist": (28, 1)}.get(dataset, (32, 3))
        assert all((MODELS[n].input_size, MODELS[n].in_channels) == spec for n in names), dataset
