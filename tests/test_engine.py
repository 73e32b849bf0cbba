"""The logits engine and its content-addressed cache: exactness, validation, progress/cancel, caching."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from relu_core import cache, engine, models, paths, runs
from relu_core.errors import Cancelled, InputError


def _random_bn(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial BatchNorm statistics, so folding them into the convolutions is actually exercised."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
    return model.eval()


@pytest.fixture(scope="module")
def small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return _random_bn(models.build_model("cnn32"))


@pytest.fixture(scope="module")
def rgb_images() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (150, 32, 32, 3), dtype=np.uint8)


SPEC = models.MODELS["cnn32"]


def _reference_logits(model: torch.nn.Module, images: np.ndarray, mean, std) -> np.ndarray:
    """Plain float32 NCHW forward pass of the unmodified model, torchvision-style normalisation."""
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    x = (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)
    with torch.no_grad():
        return model(x.contiguous()).numpy()


def test_logits_agree_between_batch_sizes(small_model, rgb_images):
    # Kernels pick other vector paths per batch size and CPU (AVX-512/AMX differ in the last bits):
    # agreement to float32 rounding, not bit identity. A misplaced or dropped batch differs by O(1).
    outputs = [
        engine.compute_logits(small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu", batch_size=b)
        for b in (7, 64, 1000)
    ]
    assert outputs[0].dtype == np.float32 and outputs[0].shape == (150, 10)
    for other in outputs[1:]:
        np.testing.assert_allclose(other, outputs[0], rtol=1e-5, atol=1e-5 * np.abs(outputs[0]).max())
        np.testing.assert_array_equal(other.argmax(1), outputs[0].argmax(1))


def test_logits_match_plain_pytorch_forward(small_model, rgb_images):
    logits = engine.compute_logits(small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu")
    reference = _reference_logits(small_model, rgb_images, SPEC.mean, SPEC.std)
    np.testing.assert_allclose(logits, reference, rtol=1e-5, atol=1e-5)
    # the caller's model is not modified (BatchNorm still there, still on the CPU, still usable)
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in small_model.modules())


def test_bf16_is_opt_in_and_close(small_model, rgb_images):
    exact = engine.compute_logits(small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu")
    bf16 = engine.compute_logits(small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu", precision="bf16")
    assert bf16.dtype == np.float32
    assert not np.array_equal(exact, bf16)
    np.testing.assert_allclose(bf16, exact, atol=0.05 * np.abs(exact).max())


def test_mixed_precision_computes_the_logits_in_float32(small_model, rgb_images):
    logits = engine.compute_logits(
        small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu", precision="bf16"
    )
    as_bf16 = torch.from_numpy(logits).bfloat16().float().numpy()
    # Logits rounded to bf16 (8 significant bits) would tie; the classifier runs outside autocast instead.
    assert (logits != as_bf16).mean() > 0.9


class _OutOfMemory(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_out_of_memory_asks_for_a_smaller_batch(rgb_images):
    with pytest.raises(InputError, match="out of memory.*smaller batch size"):
        engine.compute_logits(_OutOfMemory(), rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu")


def test_channel_and_size_mismatch_raise_input_error(small_model, rgb_images):
    grey_model = models.build_model("cnn8").eval()
    grey8 = np.zeros((4, 8, 8, 1), np.uint8)
    with pytest.raises(InputError, match="grey"):
        engine.compute_logits(grey_model, np.zeros((4, 8, 8, 3), np.uint8), mean=(0.5,), std=(0.5,), device="cpu")
    with pytest.raises(InputError, match="RGB"):
        engine.compute_logits(small_model, np.zeros((4, 32, 32, 1), np.uint8), mean=(0.5,), std=(0.5,), device="cpu")
    with pytest.raises(InputError, match="32x32"):
        engine.compute_logits(
            small_model, rgb_images[:, :16, :16], mean=SPEC.mean, std=SPEC.std, device="cpu", input_size=32
        )
    # without input_size, the model's own shape error becomes an InputError too
    with pytest.raises(InputError, match="cannot read"):
        engine.compute_logits(grey_model, np.zeros((4, 16, 16, 1), np.uint8), mean=(0.5,), std=(0.5,), device="cpu")
    with pytest.raises(InputError, match="uint8"):
        engine.compute_logits(grey_model, grey8.astype(np.float32), mean=(0.5,), std=(0.5,), device="cpu")
    with pytest.raises(InputError, match="mean"):
        engine.compute_logits(small_model, rgb_images[:2], mean=(0.5, 0.5), std=(0.5,), device="cpu")


def test_progress_and_cancel(small_model, rgb_images):
    calls: list[tuple[int, int]] = []
    engine.compute_logits(
        small_model,
        rgb_images,
        mean=SPEC.mean,
        std=SPEC.std,
        device="cpu",
        batch_size=64,
        progress=lambda done, total, message: calls.append((done, total)),
    )
    assert calls == [(64, 150), (128, 150), (150, 150)]
    seen = []

    def cancel() -> bool:
        seen.append(1)
        return len(seen) > 1

    with pytest.raises(Cancelled):
        engine.compute_logits(
            small_model, rgb_images, mean=SPEC.mean, std=SPEC.std, device="cpu", batch_size=64, cancel=cancel
        )
    assert len(seen) == 2


def test_select_device():
    assert engine.select_device("cpu") == torch.device("cpu")
    assert engine.select_device("auto").type in ("cpu", "cuda", "mps")
    with pytest.raises(InputError, match="unknown device"):
        engine.select_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="CUDA"):
            engine.select_device("cuda")
    with pytest.raises(InputError, match="precision"):
        engine.resolve_precision("fp8", torch.device("cpu"))
    assert engine.resolve_precision("auto", torch.device("cpu")) == "fp32"


# --------------------------------------------------------------------------- cache


def test_cache_roundtrip_checksum_and_corruption():
    key = {"test": "roundtrip", "n": 1}
    arrays = {"logits": np.arange(12, dtype=np.float32).reshape(3, 4), "names": np.array(["a", "bé", "c"])}
    calls = []

    def compute():
        calls.append(1)
        return arrays

    first = cache.cached("test", key, compute)
    second = cache.cached("test", key, compute)
    assert len(calls) == 1
    for name in arrays:
        assert np.array_equal(first[name], arrays[name]) and np.array_equal(second[name], arrays[name])
    path = cache.path_for("test", key)
    assert path.name == cache.key_digest(key) + ".npz" and len(path.stem) == 64
    assert not list(path.parent.glob(".tmp-*"))  # atomic write left no temporary file

    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated
    assert cache.load("test", key) is None and not path.exists()
    cache.cached("test", key, compute)
    assert len(calls) == 2

    # same size, flipped payload byte: the zip may still open, the checksum must catch it
    raw = bytearray(path.read_bytes())
    offset = raw.index(np.arange(12, dtype=np.float32).tobytes())
    raw[offset + 5] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert cache.load("test", key) is None
    assert np.array_equal(cache.cached("test", key, compute)["logits"], arrays["logits"])
    assert len(calls) == 3


def test_key_digest_is_order_independent_and_discriminating():
    assert cache.key_digest({"a": 1, "b": [1, 2]}) == cache.key_digest({"b": [1, 2], "a": 1})
    assert cache.key_digest({"a": 1, "eps": 0.001}) != cache.key_digest({"a": 1, "eps": 0.002})


def test_bytes_digest_is_the_sha256_of_the_chunks_joined(tmp_path):
    (tmp_path / "upload.bin").write_bytes(b"weights and data")
    expected = cache.file_digest(tmp_path / "upload.bin")
    assert cache.bytes_digest(b"weights", b" and data") == cache.bytes_digest(b"weights and data") == expected
    assert cache.bytes_digest(b"weights", b" and data!") != expected


# --------------------------------------------------------------------------- logits_for on real data


@pytest.mark.slow
def test_resnet20_on_exact_cifar10_and_logits_cache(shared_data, monkeypatch, tmp_path):
    if models.pretrained_weights("resnet20") is None:
        pytest.skip("pretrained ResNet-20 weights not found")
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))  # a cold cache, whatever other tests computed
    calls = []
    real = engine.compute_logits

    def counting(model, images, *args, **kwargs):
        calls.append(len(images))
        return real(model, images, *args, **kwargs)

    monkeypatch.setattr(engine, "compute_logits", counting)
    before = set(paths.cache_dir("logits").glob("*.npz"))
    run = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu", batch_size=128)
    assert run.logits.shape == (1017, 10) and run.logits.dtype == np.float32
    assert run.labels.dtype == np.int64 and len(run.class_names) == 10 and run.class_names[0] == "airplane"
    assert run.images is not None and run.images.shape == (1017, 32, 32, 3)
    accuracy = float((run.logits.argmax(1) == run.labels).mean())
    assert abs(accuracy - 0.916) <= 0.005, accuracy
    assert calls == [1017]

    again = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu")
    # cache hit: no second pass over the set, only the read's spot check of a few rows (runs.check_logits)
    assert calls[0] == 1017 and len(calls) == 2 and calls[1] <= runs.SPOT_CHECK_ROWS
    assert np.array_equal(again.logits, run.logits) and again.run_id == run.run_id

    (target,) = set(paths.cache_dir("logits").glob("*.npz")) - before
    target.write_bytes(target.read_bytes()[:100])  # corrupt the cache file
    recomputed = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu", batch_size=128)
    assert calls[2:] == [1017]  # the unreadable entry is computed again, whole (just computed: no spot check)
    np.testing.assert_allclose(recomputed.logits, run.logits, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "expected"), [("resnet20", 0.810), ("resnet56", 0.832)])
def test_pretrained_accuracy_on_the_cifar10_jpeg_folder(shared_data, name, expected):
    if models.pretrained_weights(name) is None:
        pytest.skip(f"pretrained {name} weights not found")
    run = runs.logits_for(name, None, "cifar10", device="cpu")
    assert run.logits.shape == (10_000, 10) and run.dataset_name == "cifar10-test"
    accuracy = float((run.logits.argmax(1) == run.labels).mean())
    assert abs(accuracy - expected) <= 0.005, accuracy


def test_folding_batchnorm_leaves_models_running_in_other_threads_alone():
    """torch.fx patches nn.Module.__call__ for the whole process while it traces: a job running a model in
    another thread meanwhile (a corruption study beside a logits job) failed with "module is not installed as
    a submodule"."""
    import threading

    busy, stop, failures = models.build_model("resnet20", 10).eval(), threading.Event(), []
    x = torch.zeros(2, 3, 32, 32)

    def run_beside():
        with torch.no_grad():
            while not stop.is_set():
                try:
                    busy(x)
                except Exception as exc:  # noqa: BLE001 - collected for the assertion
                    failures.append(repr(exc))

    thread = threading.Thread(target=run_beside)
    thread.start()
    try:
        for _ in range(4):
            folded = engine.inference_model(models.build_model("resnet20", 10), torch.device("cpu"))
            assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    finally:
        stop.set()
        thread.join()
    assert not failures, failures[:3]


TF32_NEW_API = """
import torch
from relu_core import engine
cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
cudnn.conv.fp32_precision, matmul.fp32_precision = "tf32", "tf32"  # the API PyTorch now recommends
with engine.full_float32(torch.device("cuda"), "fp32"):
    inside = (cudnn.conv.fp32_precision, matmul.fp32_precision)
with engine.full_float32(torch.device("cuda"), "bf16"):
    mixed = (cudnn.conv.fp32_precision, matmul.fp32_precision)
print(inside, mixed, (cudnn.conv.fp32_precision, matmul.fp32_precision))
"""


def test_fp32_on_cuda_keeps_to_the_tf32_api_the_process_uses():
    """A process that set TF32 through ``fp32_precision`` can no longer read the legacy flags (PyTorch raises):
    the switch then uses the new settings (a subprocess: the mix of APIs sticks to the process)."""
    done = subprocess.run(
        [sys.executable, "-c", TF32_NEW_API],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "('ieee', 'ieee') ('tf32', 'tf32') ('tf32', 'tf32')"


def test_fp32_on_cuda_turns_tf32_off_while_any_forward_runs_and_restores_it():
    import threading

    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = (cudnn.allow_tf32, matmul.allow_tf32)
    try:
        cudnn.allow_tf32, matmul.allow_tf32 = True, True
        cuda = torch.device("cuda")
        with engine.autocast(torch.device("cpu"), "fp32"):
            assert cudnn.allow_tf32 and matmul.allow_tf32  # nothing to do on the CPU
        inside, release = threading.Event(), threading.Event()

        def other_forward():
            with engine.autocast(cuda, "fp32"):
                inside.set()
                release.wait(30)

        thread = threading.Thread(target=other_forward)
        with engine.autocast(cuda, "fp32"):
            assert not cudnn.allow_tf32 and not matmul.allow_tf32
            thread.start()
            assert inside.wait(30)
        assert not cudnn.allow_tf32 and not matmul.allow_tf32  # the other forward still runs: still off
        release.set()
        thread.join(30)
        assert cudnn.allow_tf32 and matmul.allow_tf32  # the last one out restores the user's setting
        cudnn.allow_tf32, matmul.allow_tf32 = False, True
        with engine.autocast(cuda, "fp32"):
            pass
        assert (cudnn.allow_tf32, matmul.allow_tf32) == (False, True)
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = saved
