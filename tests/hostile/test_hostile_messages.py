"""Messages that must neither leak nor mislead, and slow work that says so before it starts: upload errors
name the archive's members (never the cache or a temporary folder), no control character or terminal escape
reaches a message, PyTorch's advice to load a file unsafely never does, an empty file is called empty, a
non-finite score names its detector and T, a model's failed allocation is the model's failure, TorchScript's
deprecation notices stay quiet; ``--device cuda`` without a GPU fails before any data is read, and large work
gives an estimate of its duration first."""

from __future__ import annotations

import io
import pickle
import zipfile

import hostile_files as hf
import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from relu_core import cli, datasets, errors, paths, protocol, runs
from relu_core.datasets import userdata
from relu_core.errors import InputError
from studio import sidebar


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    status = cli.main(argv)
    return status, capsys.readouterr().err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _png(size: tuple[int, int] = (6, 5)) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((size[1], size[0], 3), np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# --------------------------------------------------------------------------------- paths and control codes


@pytest.mark.parametrize(
    "members, named",
    [
        ({"a/0.png": _png(), "a/1.png": b"not an image", "b/0.png": _png()}, "a/1.png"),
        ({"a/0.png": _png(), "b/0.png": _png((7, 7))}, "b/0.png is 7x7"),
    ],
    ids=["unreadable-image", "mixed-sizes"],
)
def test_zip_upload_errors_name_the_members_not_the_server_paths(members, named):
    with pytest.raises(InputError) as caught:
        datasets.load_uploaded_dataset(_zip(members), "cats.zip")
    message = str(caught.value)
    assert named in message and "zip archive cats" in message, message
    assert str(paths.cache_dir("datasets")) not in message and "/tmp" not in message, message


def test_escape_codes_in_a_class_folder_never_reach_stderr(tmp_path, capsys):
    folder = "\x1b[31mred\x1b]0;owned\x07\u202e"
    (tmp_path / "d.zip").write_bytes(_zip({f"{folder}/0.png": _png(), f"{folder}/1.png": b"broken", "b/0.png": _png()}))
    status, err = _cli(
        ["logits", "--model", "cnn8", "--dataset", f"zip:{tmp_path / 'd.zip'}", "--out", str(tmp_path / "o.npz")],
        capsys,
    )
    line = _one_error_line(err)
    assert status == 2 and "red" in line and "1.png" in line
    assert not any(c in err for c in ("\x1b", "\x07", "\u202e")), repr(err)


class Shouts(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 0:
            raise RuntimeError("\x1b[2J\x1b[31mboom\x1b[0m")
        return x


def test_escape_codes_in_a_models_exception_never_reach_stderr(tmp_path, capsys):
    status, err = _cli(hf.evaluate_argv(hf.script(Shouts(), tmp_path / "shouts.pt"), "--methods", "msp"), capsys)
    assert status == 2 and "boom" in _one_error_line(err) and "\x1b" not in err, repr(err)


def test_messages_lose_control_characters_in_one_place():
    exc = InputError("bad\x1b[1;31m file\x00 name\u202e.npz\r\nsecond line")
    assert errors.user_message(exc) == "bad file name.npz"
    assert errors.one_line(exc) == "bad file name.npz second line"


# ----------------------------------------------------------------------------------- PyTorch's unsafe advice

ADVICE = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, do those steps "
    "only if you trust the source of the checkpoint. (1) Re-running `torch.load` with `weights_only` set to "
    "`False` will likely succeed, but it can result in arbitrary code execution. WeightsUnpickler error: "
    "Unsupported operand 149"
)


def test_pytorchs_weights_only_advice_never_reaches_the_user(tmp_path, capsys, monkeypatch):
    def refuses(*args, **kwargs):
        raise pickle.UnpicklingError(ADVICE)

    monkeypatch.setattr(torch, "load", refuses)
    (tmp_path / "m.pt").write_bytes(b"\x80\x02 not really a checkpoint")
    status, err = _cli(hf.evaluate_argv(tmp_path / "m.pt", "--methods", "msp"), capsys)
    line = _one_error_line(err)
    assert status == 2 and "m.pt" in line and "a plain pickle" in line and "opcode 149" in line  # the reason, in words
    assert "weights_only" not in line and "trust" not in line and "False" not in line, line
    assert "weights_only" not in errors.user_message(InputError(f"m.pt: {ADVICE}"))


# ------------------------------------------------------------------------------------------ empty uploads


def test_an_empty_checkpoint_upload_is_called_empty():
    with pytest.raises(InputError, match=r"empty\.pt is empty \(0 bytes\)"):
        sidebar.load_upload("model", b"", "", model_data=b"", model_filename="empty.pt", arch="cnn8")


def test_an_empty_data_set_upload_is_called_empty(tmp_path):
    weights = hf.state_dict_file(tmp_path / "w.pt").read_bytes()
    with pytest.raises(InputError, match=r"data\.zip is empty \(0 bytes\)"):
        sidebar.load_upload("model", b"", "data.zip", model_data=weights, model_filename="w.pt", arch="cnn8")


# ------------------------------------------------------------------------------------- what failed, named


def test_an_overflowing_temperature_names_the_detector_and_t(tmp_path, capsys):
    path = tmp_path / "ten.npz"
    labels = np.arange(200) % 10
    logits = np.random.default_rng(0).normal(size=(200, 10)).astype(np.float32) + 2 * np.eye(10)[labels]
    path.write_bytes(hf.npz(logits=logits.astype(np.float32), labels=labels))
    status, err = _cli(["evaluate", "--logits", str(path), "--seeds", "1", "--temperature", "1e308"], capsys)
    line = _one_error_line(err)
    assert status == 2 and "Energy at T = 1e+308" in line and "smaller temperature" in line, line


class Allocates(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.zeros([1 << 50])  # 4 PiB: beyond any address space, so it fails at once everywhere
        return x.flatten(1)[:, :10] + big[0]


def test_a_models_failed_allocation_is_the_models_failure(tmp_path, capsys):
    status, err = _cli(hf.evaluate_argv(hf.script(Allocates(), tmp_path / "alloc.pt"), "--methods", "msp"), capsys)
    line = _one_error_line(err)
    assert status == 2 and "the model failed in forward" in line and "4,503,599,627,370,496 bytes" in line, line
    assert "cannot read" not in line


def test_torchscript_deprecation_notices_stay_quiet(tmp_path, capsys):
    path = hf.script(runs.small_cnn("cnn8", "digits"), tmp_path / "cnn8_scripted.pt")
    capsys.readouterr()
    status, err = _cli(hf.evaluate_argv(path, "--methods", "msp", "--bootstrap", "0"), capsys)
    assert status == 0 and "deprecated" not in err, err


# --------------------------------------------------------------------------------------------- slow work


@pytest.mark.parametrize("command", ["evaluate", "logits"])
def test_cuda_without_a_gpu_fails_before_any_data_is_read(command, tmp_path, capsys, monkeypatch):
    read = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runs, "logits_for", lambda *args, **kwargs: read.append(args) or pytest.fail("data read"))
    argv = [command, "--model", "cnn8", "--dataset", "digits", "--device", "cuda"]
    status, err = _cli([*argv, "--out", str(tmp_path / "o.npz")] if command == "logits" else argv, capsys)
    assert status == 2 and "CUDA" in _one_error_line(err) and not read


def test_evaluate_says_how_long_large_work_takes_before_it_starts(tmp_path, capsys, monkeypatch):
    seconds = protocol.evaluation_seconds(1_000_000, 10, 10, protocol.resolve_methods(None), 1000)
    assert 2 * 60 <= seconds <= 6 * 60  # the measured 3-4 min of the defaults on a million x 10 logits
    monkeypatch.setattr(protocol, "EVALUATION_RATES", {k: v / 1e6 for k, v in protocol.EVALUATION_RATES.items()})
    path = tmp_path / "l.npz"
    path.write_bytes(hf.npz(logits=hf.LOGITS, labels=hf.LABELS))
    status, err = _cli(["evaluate", "--logits", str(path), "--seeds", "2", "--bootstrap", "10"], capsys)
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert status == 0 and len(notes) == 1, err
    assert "40 x 4 logits, 2 seed(s)" in notes[0] and " take about " in notes[0] and "EVALUATION_RATES" in notes[0]


def test_a_large_zip_says_how_long_it_takes_from_its_first_progress(monkeypatch):
    monkeypatch.setattr(userdata, "ZIP_FILES_PER_S", 1)
    members = {f"{c}/{k}.png": _png() for c in "ab" for k in range(6)}
    messages: list[str] = []
    datasets.load_uploaded_dataset(_zip(members), "many.zip", progress=lambda d, t, m: messages.append(m))
    assert messages and "12 files take about 12 s" in messages[0], messages
    assert all("12 files take" in m for m in messages)


def test_small_work_says_nothing_extra(tmp_path, capsys):
    path = tmp_path / "l.npz"
    path.write_bytes(hf.npz(logits=hf.LOGITS, labels=hf.LABELS))
    status, err = _cli(["evaluate", "--logits", str(path), "--seeds", "1", "--bootstrap", "10"], capsys)
    assert status == 0 and "note:" not in err
