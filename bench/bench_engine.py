"""Benchmark: the logits engine against a plain fp32 PyTorch DataLoader loop, same model, same data, same run.

Default: the shared pretrained ResNet-56 on the CIFAR-10 JPEG test folder (10,000 images).
The plain loop is torchvision ``ImageFolder`` + ``ToTensor`` + ``Normalize``, ``DataLoader(batch_size=256)``
with default settings, fp32, ``torch.no_grad()``. The engine decodes the JPEGs once (timed separately, then
reported both without and with that decode) and runs ``compute_logits``; the eps pass is Doctor's input
pre-processing (gradient step + forward) on ``--eps-images`` images.

GPU size run (synthetic uint8 images, random weights)::

    python bench/bench_engine.py --device cuda --model resnet34_cifar --n-images 300000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from anywhere
os.environ.setdefault("RELU_STUDIO_DATA", str(REPO.parent / "shared" / "data"))
os.environ["RELU_STUDIO_CACHE"] = tempfile.mkdtemp(prefix="relu-bench-")  # measure work, not cache hits

from relu_core import detectors, engine, models, preprocessing  # noqa: E402

JPEG_FOLDER = Path(os.environ["RELU_STUDIO_DATA"]) / "cifar10" / "test_jpeg_q75"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plain_loop_folder(
    model: torch.nn.Module, folder: Path, mean, std, device: torch.device
) -> tuple[float, np.ndarray, np.ndarray]:
    from torchvision import datasets as tv_datasets
    from torchvision import transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])
    loader = torch.utils.data.DataLoader(tv_datasets.ImageFolder(str(folder), transform=transform), batch_size=256)
    model = model.to(device).eval()
    outputs, labels = [], []
    start = time.perf_counter()
    with torch.no_grad():
        for x, y in loader:
            outputs.append(model(x.to(device)).cpu())
            labels.append(y)
    _sync(device)
    return time.perf_counter() - start, torch.cat(outputs).numpy(), torch.cat(labels).numpy()


def plain_loop_tensor(
    model: torch.nn.Module, images: np.ndarray, mean, std, device: torch.device
) -> tuple[float, np.ndarray]:
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(images))
    loader = torch.utils.data.DataLoader(dataset, batch_size=256)
    mean_t = torch.tensor(mean).view(1, -1, 1, 1)
    std_t = torch.tensor(std).view(1, -1, 1, 1)
    model = model.to(device).eval()
    outputs = []
    start = time.perf_counter()
    with torch.no_grad():
        for (x,) in loader:
            x = (x.permute(0, 3, 1, 2).float() / 255.0 - mean_t) / std_t
            outputs.append(model(x.contiguous().to(device)).cpu())
    _sync(device)
    return time.perf_counter() - start, torch.cat(outputs).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="auto, cpu, cuda or mps (default cpu)")
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--n-images", type=int, default=None, help="synthetic random images instead of the JPEG folder")
    parser.add_argument("--batch-size", type=int, default=None, help="engine batch size (default: the engine's)")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--eps", type=float, default=0.002)
    parser.add_argument("--eps-images", type=int, default=2000)
    parser.add_argument("--skip-plain", action="store_true", help="skip the plain DataLoader loop")
    args = parser.parse_args()

    device = engine.select_device(args.device)
    spec = models.get_spec(args.model)
    model = models.build_model(args.model)
    weights = models.pretrained_weights(args.model)
    if weights is not None:
        models.load_state_dict_file(model, weights)
    model.eval()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"device {device} ({torch.get_num_threads()} CPU threads, load average {load:.1f}), model {args.model} "
        f"({'pretrained ' + weights.name if weights else 'random weights'}), torch {torch.__version__}"
    )

    plain_s = None
    if args.n_images is None:
        from relu_core import datasets

        start = time.perf_counter()
        data = datasets.load_dataset(f"imagefolder:{JPEG_FOLDER}")
        decode_s = time.perf_counter() - start
        images, labels = data.images, data.labels
        print(
            f"data: {JPEG_FOLDER} ({len(images)} JPEGs), one-time decode {decode_s:.2f} s "
            f"({len(images) / decode_s:.0f} images/s)"
        )
        if not args.skip_plain:
            plain_s, plain_logits, plain_labels = plain_loop_folder(model, JPEG_FOLDER, spec.mean, spec.std, device)
    else:
        decode_s = 0.0
        images = np.random.default_rng(0).integers(
            0, 256, (args.n_images, spec.input_size, spec.input_size, spec.in_channels), dtype=np.uint8
        )
        labels = None
        print(f"data: {args.n_images} synthetic random uint8 images {images.shape[1:]}")
        if not args.skip_plain:
            plain_s, plain_logits = plain_loop_tensor(model, images, spec.mean, spec.std, device)
    n = len(images)

    _sync(device)
    start = time.perf_counter()
    logits = engine.compute_logits(
        model, images, mean=spec.mean, std=spec.std, device=device, batch_size=args.batch_size, precision=args.precision
    )
    _sync(device)
    engine_s = time.perf_counter() - start
    precision = engine.resolve_precision(args.precision, device)

    eps_n = min(args.eps_images, n)
    doctor = detectors.Doctor()
    start = time.perf_counter()
    preprocessing.perturbed_scores(
        model,
        images[:eps_n],
        doctor,
        args.eps,
        mean=spec.mean,
        std=spec.std,
        device=device,
        batch_size=args.batch_size,
        precision=args.precision,
    )
    _sync(device)
    eps_s = time.perf_counter() - start

    print(f"{'':38s}{'images/s':>10s}{'seconds':>10s}")
    if plain_s is not None:
        print(f"{'plain DataLoader loop (fp32, bs 256)':38s}{n / plain_s:10.0f}{plain_s:10.2f}")
    print(f"{'engine logits (' + precision + ')':38s}{n / engine_s:10.0f}{engine_s:10.2f}")
    if decode_s:
        print(
            f"{'engine logits incl. one-time decode':38s}{n / (engine_s + decode_s):10.0f}{engine_s + decode_s:10.2f}"
        )
    print(f"{f'engine eps pass (Doctor, {eps_n} images)':38s}{eps_n / eps_s:10.0f}{eps_s:10.2f}")
    if plain_s is not None:
        print(
            f"speed-up over the plain loop: {plain_s / engine_s:.2f}x (logits only), "
            f"{plain_s / (engine_s + decode_s):.2f}x (including the decode)"
        )
        print(f"max |engine - plain| logit difference: {np.abs(logits - plain_logits).max():.2e}")
    if labels is not None:
        accuracy = float((logits.argmax(1) == labels).mean())
        line = f"accuracy: engine {accuracy:.4f}"
        if plain_s is not None:
            line += f", plain loop {float((plain_logits.argmax(1) == plain_labels).mean()):.4f}"
        print(line)


if __name__ == "__main__":
    main()
