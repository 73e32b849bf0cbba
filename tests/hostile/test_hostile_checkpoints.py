"""Checkpoints that load but cannot predict: meta, sparse or complex tensors, a TorchScript module without
``forward``, a model whose output width depends on the batch. Each is refused in one line (InputError: exit 2
on the command line, the same line in the app), never "unexpected error" or a warning and wrong numbers."""

from __future__ import annotations

from pathlib import Path

import hostile_files as hf
import pytest
import torch
from torch import nn

from relu_core import cli, models
from relu_core.errors import InputError
from studio import sidebar


def _state_dict(path: Path, change) -> Path:
    """cnn8's state dict with every floating-point tensor passed through ``change``."""
    state = models.cnn8(10).state_dict()
    torch.save({k: change(v) if v.is_floating_point() else v for k, v in state.items()}, path)
    return path


class OnlyPredict(nn.Module):
    """Scripted for an exported method only: the archive has no ``forward``."""

    @torch.jit.export
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :10]


class WidthOfBatch(nn.Module):
    """10 logits per image in a batch of even size, 9 in an odd one (digits' 899 test images end in an odd
    batch for batch sizes 64 and 256)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, : 10 if x.shape[0] % 2 == 0 else 9]


def _checkpoint(name: str, folder: Path) -> Path:
    path = folder / f"{name}.pt"
    if name == "meta":
        return _state_dict(path, lambda t: torch.empty(t.shape, dtype=t.dtype, device="meta"))
    if name == "sparse":
        return _state_dict(path, lambda t: t.to_sparse())
    if name == "complex":
        return _state_dict(path, lambda t: t.to(torch.complex64))
    return hf.script({"no-forward": OnlyPredict, "width-changes": WidthOfBatch}[name](), path)


#: Each bad checkpoint and the (lower-case) part of the one line that refuses it.
BAD_CHECKPOINTS = {
    "meta": "holds tensors without data (meta tensors) in features.0.weight",
    "sparse": "holds sparse or other non-dense tensors in features.0.weight",
    "complex": "holds complex tensors in features.0.weight",
    "no-forward": "is a torchscript module without a forward method",
    "width-changes": "returned 10 outputs per image for the first batch but 9 for images",
}


@pytest.mark.parametrize("name", list(BAD_CHECKPOINTS))
def test_cli_refuses_a_checkpoint_that_cannot_predict_with_exit_2(name, tmp_path, capsys):
    weights = _checkpoint(name, tmp_path)
    status = cli.main(hf.evaluate_argv(weights, "--methods", "msp", "--batch-size", "64"))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "unexpected" not in lines[0], captured.err
    assert BAD_CHECKPOINTS[name] in lines[0].lower() and len(lines[0]) < 300
    assert "MSP" not in captured.out  # no table computed from a model refused


@pytest.mark.parametrize("name", list(BAD_CHECKPOINTS))
def test_an_uploaded_checkpoint_that_cannot_predict_is_one_input_error(name, tmp_path):
    """The app's path (the sidebar's upload, its default batch size): the upload's bytes, no file."""
    data = _checkpoint(name, tmp_path).read_bytes()
    with pytest.raises(InputError) as caught:
        sidebar.load_upload(
            "model", b"", "", model_data=data, model_filename=f"{name}.pt", arch="cnn8", dataset_spec="digits"
        )
    message = str(caught.value)
    assert BAD_CHECKPOINTS[name] in message.lower() and "\n" not in message
