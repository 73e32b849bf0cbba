"""ONNX classifiers in (``relu_core.onnx_model``, ``runs.onnx_run``): a tiny CNN exported here with
``torch.onnx.export`` gives the logits its PyTorch original gives, through the CLI (``logits``, ``evaluate``) and the
app's upload; hostile ONNX files are refused in one line (exit 2); ε is refused for ONNX models."""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

from relu_core import cli, onnx_model, runs
from relu_core.errors import InputError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def tiny_cnn(digits_run) -> nn.Module:
    """A tiny CNN computing the digits fixture's linear classifier: a 1x1 identity convolution, then its layer."""
    conv = nn.Conv2d(1, 1, 1)
    with torch.no_grad():
        conv.weight.fill_(1.0)
        conv.bias.zero_()
    return nn.Sequential(conv, *digits_run.model).eval()


def export(model: nn.Module, path, shape=(1, 1, 8, 8), **metadata) -> bytes:
    """``model`` exported to ONNX at ``path`` (batch axis free), ``metadata`` in its metadata properties."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model.eval(),
            (torch.zeros(shape),),
            str(path),
            dynamo=False,
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}},
        )
    if metadata:
        proto = onnx.load(str(path))
        helper.set_model_props(proto, metadata)
        onnx.save(proto, str(path))
    return path.read_bytes()


@pytest.fixture(scope="module")
def onnx_file(digits_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "tiny_cnn.onnx"
    export(tiny_cnn(digits_run), path, mean="0.5", std="0.5")
    return path


def test_onnx_logits_equal_the_pytorch_model_and_are_cached(onnx_file, digits_run, monkeypatch):
    run = runs.onnx_run(onnx_file, "digits", device="cpu", batch_size=100)  # batches do not divide 899
    np.testing.assert_allclose(run.logits, digits_run.logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(run.labels, digits_run.labels)
    assert run.model is None and run.images is not None and run.onnx_file == "tiny_cnn.onnx"
    assert (run.mean, run.std) == ((0.5,), (0.5,)) and "metadata" in run.source
    runs.remember(run)  # like an uploaded PyTorch model, not recorded: its id is not its logits' content id
    assert runs.describe(run.run_id) is None

    def recomputed(*args, **kwargs):
        raise AssertionError("the cached logits were computed again")

    monkeypatch.setattr(onnx_model, "compute_logits", recomputed)
    again = runs.onnx_run(onnx_file.read_bytes(), "digits", weights_name="renamed.onnx")  # same content, same key
    assert again.run_id == run.run_id
    np.testing.assert_array_equal(again.logits, run.logits)


def test_normalisation_comes_from_the_data_set_when_the_model_declares_none(digits_run, tmp_path):
    path = tmp_path / "plain.onnx"
    export(tiny_cnn(digits_run), path)
    run = runs.onnx_run(path, "digits", device="cpu")
    assert (run.mean, run.std) == ((0.5,), (0.5,)) and "digits's registered models" in run.source
    np.testing.assert_allclose(run.logits, digits_run.logits, rtol=1e-5, atol=1e-5)


def test_cli_logits_and_evaluate_take_an_onnx_model(onnx_file, digits_run, tmp_path, capsys):
    out = tmp_path / "logits.npz"
    argv = ["logits", "--weights", str(onnx_file), "--dataset", "digits", "--out", str(out), "--device", "cpu"]
    assert cli.main(argv) == 0
    assert "ONNX" in capsys.readouterr().out
    with np.load(out) as data:
        np.testing.assert_allclose(data["logits"], digits_run.logits, rtol=1e-5, atol=1e-5)
    argv = ["evaluate", "--weights", str(onnx_file), "--dataset", "digits", "--seeds", "2", "--json"]
    assert cli.main(argv) == 0
    direct = ["evaluate", "--logits", str(out), "--seeds", "2", "--json", "--bootstrap", "0"]
    from_onnx = json.loads(capsys.readouterr().out)
    assert cli.main(direct) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert set(from_onnx) == set(from_file)
    assert from_onnx["relu"]["auroc"] == pytest.approx(from_file["relu"]["auroc"], abs=1e-6)


def _one_error_line(argv, capsys) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_eps_is_refused_for_onnx_models_before_any_work(onnx_file, capsys):
    argv = ["evaluate", "--weights", str(onnx_file), "--dataset", "digits", "--eps", "0.001"]
    assert "not available for ONNX models" in _one_error_line(argv, capsys)


def test_onnx_flags_that_do_not_go_together_give_one_line(onnx_file, capsys):
    argv = ["logits", "--model", "cnn8", "--weights", str(onnx_file), "--dataset", "digits", "--out", "x.npz"]
    assert "without --model" in _one_error_line(argv, capsys)
    assert "needs --dataset" in _one_error_line(["evaluate", "--weights", str(onnx_file)], capsys)


# ----------------------------------------------------------------------------------------- hostile files


def _linear_graph(
    n_in=64, n_classes=10, input_shape=("n", 1, 8, 8), extra_nodes=(), output="logits", out_rank=2, **graph_kw
):
    """A valid linear classifier graph (Flatten, Gemm) by hand, to be broken by each case."""
    rng = np.random.default_rng(0)
    weight = helper.make_tensor("W", TensorProto.FLOAT, [n_in, n_classes], rng.normal(size=n_in * n_classes))
    nodes = [
        helper.make_node("Flatten", ["images"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["logits"]),
        *extra_nodes,
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [f"d{k}" for k in range(out_rank)])],
        initializer=[weight, *graph_kw.pop("initializer", [])],
        **graph_kw,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _hostile_files() -> dict[str, tuple[bytes, str]]:
    """name -> (file content, a phrase its one line holds)."""
    good = _linear_graph().SerializeToString()
    huge = TensorProto(name="huge", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20])  # 4 TiB declared, no data
    external = helper.make_tensor("W2", TensorProto.FLOAT, [2], [1.0, 2.0])
    external.data_location = TensorProto.EXTERNAL
    external.ClearField("float_data")
    external.external_data.add(key="location", value="/etc/passwd")
    custom = helper.make_node("Frobnicate", ["logits"], ["out"], domain="com.evil")
    unknown = helper.make_node("Frobnicate", ["logits"], ["out"])
    nan = helper.make_node("Log", ["neg"], ["out"])
    negate = helper.make_node("Neg", ["logits"], ["neg"])
    three_d = helper.make_node("Unsqueeze", ["logits", "axes"], ["out"])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    files = {
        "empty": (b"", "empty"),
        "truncated": (good[: len(good) // 2], "truncated or not onnx"),
        "not-onnx": (b"\x00\xff" * 64, "not a valid onnx model"),
        "huge-initializer": (_linear_graph(initializer=[huge]).SerializeToString(), "more than the limit"),
        "external-data": (_linear_graph(initializer=[external]).SerializeToString(), "external data"),
        "custom-op": (_linear_graph(extra_nodes=[custom], output="out").SerializeToString(), "custom operators"),
        "unknown-op": (_linear_graph(extra_nodes=[unknown], output="out").SerializeToString(), "frobnicate"),
        "rank-2-input": (_linear_graph(input_shape=("n", 64)).SerializeToString(), "rank 4"),
        "wrong-size": (_linear_graph(n_in=3 * 32 * 32, input_shape=("n", 3, 32, 32)).SerializeToString(), "channel"),
        "wrong-classes": (_linear_graph(n_classes=3).SerializeToString(), "3 outputs but"),
        "nan-logits": (_linear_graph(extra_nodes=[negate, nan], output="out").SerializeToString(), "nan or infinite"),
        "3d-logits": (
            _linear_graph(extra_nodes=[three_d], output="out", out_rank=3, initializer=[axes]).SerializeToString(),
            "(n, classes)",
        ),
    }
    return files


HOSTILE = _hostile_files()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_onnx_files_give_one_line_and_exit_2(name, tmp_path, capsys):
    content, phrase = HOSTILE[name]
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(content)
    argv = ["logits", "--weights", str(path), "--dataset", "digits", "--out", str(tmp_path / "l.npz")]
    line = _one_error_line(argv, capsys)
    assert phrase in line.lower(), line
    assert not (tmp_path / "l.npz").exists()


def test_the_hand_made_graph_itself_is_fine():
    """The hostile cases break a graph that works (so each refusal is the one its case is about)."""
    model = onnx_model.load_onnx(_linear_graph().SerializeToString(), "good.onnx", "cpu")
    images = np.zeros((5, 8, 8, 1), dtype=np.uint8)
    normalization = runs.models.Normalization((0.5,), (0.5,))
    assert onnx_model.compute_logits(model, images, normalization).shape == (5, 10)
    with pytest.raises(InputError, match="CPU or on CUDA"):
        onnx_model.load_onnx(_linear_graph().SerializeToString(), "good.onnx", "mps")


# ------------------------------------------------------------------------------------------------ the app


@pytest.mark.slow
def test_onnx_upload_becomes_a_run_that_explore_shows(onnx_file, digits_run):
    from apptest_pages import EXPLORE, app

    from relu_core import jobs

    at = app(timeout=300).run()
    assert not at.exception, [e.value for e in at.exception]
    at.file_uploader(key="upload_model").upload("tiny_cnn.onnx", onnx_file.read_bytes()).run()
    assert any("not available for ONNX models" in c.value for c in at.caption)
    at.selectbox(key="upload_registered").set_value("digits").run()
    at.button(key="upload_compute").click().run()
    for job in jobs.MANAGER.jobs():
        assert job.wait(300), f"job {job.key} did not end"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = runs.RUNS[at.session_state["run_id"]]
    assert run.onnx_file == "tiny_cnn.onnx"
    np.testing.assert_allclose(run.logits, digits_run.logits, rtol=1e-5, atol=1e-5)
    at.switch_page(EXPLORE).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("not available for ONNX models" in c.value for c in at.caption)
    assert at.session_state["run_id"] == run.run_id
    assert "Export this detector" in [b.proto.label for b in at.get("download_button")]
    from relu_core import detector_export, explore

    exported = zipfile.ZipFile(
        io.BytesIO(detector_export.export_zip(run, detector_export.from_setting(run, explore.Setting())))
    )
    assert sorted(exported.namelist()) == ["detector.json", "detector.onnx", "detector.pt2"]  # logits in only


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", ["Start.py", "Explore.py", "Corruptions.py", "Studies.py", "Baselines.py", "Compare.py"]
)
def test_every_page_opens_on_an_onnx_run(page, onnx_file, pages):
    """An ONNX run has images and no PyTorch model (a pair no other run has): every page draws, and those that
    run the model say in one line that they need one."""
    run = runs.onnx_run(onnx_file, "digits", device="cpu")
    at = pages.open(page, run)
    pages.no_exceptions(at)
    assert all("\n" not in e.value for e in at.error)


def test_the_upload_path_reads_onnx_bytes_and_refuses_a_hostile_file(onnx_file, digits_run):
    from studio import sidebar

    def upload(content: bytes):
        return sidebar.load_upload("model", b"", "", model_data=content, model_filename="m.onnx", dataset_spec="digits")

    run = upload(onnx_file.read_bytes())  # no architecture needed
    assert run.onnx_file == "m.onnx" and run.model is None
    np.testing.assert_allclose(run.logits, digits_run.logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match="truncated or not ONNX"):
        upload(HOSTILE["truncated"][0])
