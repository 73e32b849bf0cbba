"""ONNX models bounded at run time (issue 37, root 2, and the ONNX messages of #9).

A valid 3 KB file can ask for anything once it runs: an ``Expand`` of each batch's logits to a huge shape
(22 GB), a ``Loop`` of 2^62 iterations (never ends), a million ``Identity`` nodes (3.5 GB to load), a fixed
batch of 2^31 − 1 images, an output of strings, an opset the runtime lacks. onnxruntime runs in a process of
its own (``relu_core.onnx_worker``): its memory capped (``limits.ONNX_MEMORY_BYTES``), loading and each batch
bounded in time (``limits.ONNX_BATCH_SECONDS``), killed at once on cancel; graphs beyond
``limits.MAX_ONNX_NODES`` operators are refused before onnxruntime sees them. Each case ends in one line that
says what happened and what to do, without onnxruntime's coloured log or its ``/onnxruntime_src/`` paths.

The models are built here with onnx's helper API: a linear classifier of digits' 8x8 images, then the hostile
part on its logits.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from relu_core import cli, jobs, limits, onnx_model, onnx_worker, runs
from relu_core.errors import Cancelled, InputError
from relu_core.models import Normalization

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

#: Seconds a stopped model may take to end its command, under load: far below "never", far above the limit set.
GENEROUS_S = 90


def _classifier(extra_nodes=(), output="logits", out_type=TensorProto.FLOAT, initializer=(), batch="n", opset=17):
    """digits' 8x8 images -> 10 logits (Flatten, MatMul), then ``extra_nodes`` ending in ``output``."""
    weight = helper.make_tensor("W", TensorProto.FLOAT, [64, 10], np.random.default_rng(0).normal(size=640))
    nodes = [
        helper.make_node("Flatten", ["images"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["logits"]),
        *extra_nodes,
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 1, 8, 8])],
        [helper.make_tensor_value_info(output, out_type, ["n", "c"])],
        initializer=[weight, *initializer],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def expand(rows: int) -> bytes:
    """Each batch's logits expanded to (rows, batch, 10), then averaged back: ``rows`` x batch x 40 bytes asked."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [rows, 1, 10])
    nodes = [
        helper.make_node("Expand", ["logits", "shape"], ["big"]),
        helper.make_node("ReduceMean", ["big"], ["out"], axes=[0], keepdims=0),
    ]
    return _classifier(nodes, output="out", initializer=[shape])


def endless_loop(trips: int = 1 << 62) -> bytes:
    """A Loop of ``trips`` iterations passing the logits through unchanged."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["x_in"], ["x_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, ["n", 10]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, ["n", 10]),
        ],
    )
    trip = helper.make_tensor("trips", TensorProto.INT64, [], [trips])
    keep_going = helper.make_tensor("keep_going", TensorProto.BOOL, [], [True])
    loop = helper.make_node("Loop", ["trips", "keep_going", "logits"], ["out"], body=body)
    return _classifier([loop], output="out", initializer=[trip, keep_going])


def identities(n: int) -> bytes:
    nodes = [helper.make_node("Identity", [f"t{k}" if k else "logits"], [f"t{k + 1}"]) for k in range(n)]
    return _classifier(nodes, output=f"t{n}")


def _cli(tmp_path, content: bytes, capfd, *extra: str) -> tuple[int, str]:
    """``logits`` of the ONNX file ``content`` on digits: the exit status and everything written to the
    process's stderr (file descriptor 2: a native library's log too)."""
    path = tmp_path / "m.onnx"
    path.write_bytes(content)
    argv = [
        "logits",
        "--weights",
        str(path),
        "--dataset",
        "digits",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "l.npz"),
    ]
    status = cli.main([*argv, *extra])
    return status, capfd.readouterr().err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "\x1b" not in err and "onnxruntime_src" not in err and "unexpected" not in err, err
    return lines[0]


def _gone(pid: int | None) -> bool:
    """Whether the process ``pid`` has ended (it is the test's child: reaped by the worker's kill)."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -------------------------------------------------------------------------------------------------- memory


def test_an_expand_asking_for_terabytes_is_one_line_naming_the_bytes(tmp_path, capfd):
    status, err = _cli(tmp_path, expand(1 << 34), capfd)  # 2^34 x 100 batch rows x 40 bytes: 64 TiB per batch
    line = _one_line(err)
    assert status == 2 and "asked for" in line and "bytes while running a batch" in line, line
    assert "memory limit of 4 GiB" in line and "ONNX_MEMORY_BYTES" in line and "cannot read" not in line, line


def test_the_memory_cap_holds_below_what_the_machine_would_give(tmp_path, capfd, monkeypatch):
    """1.25 GiB asked (any machine here has it) is refused under a 256 MiB cap: the cap, not the machine, says no."""
    monkeypatch.setattr(limits, "ONNX_MEMORY_BYTES", 256 << 20)
    status, err = _cli(tmp_path, expand(1 << 23), capfd, "--batch-size", "4")  # 2^23 x 4 x 40 bytes = 1.25 GiB
    line = _one_line(err)
    assert status == 2 and "asked for 1,342,177,280 bytes" in line and "memory limit of 256 MiB" in line, line
    monkeypatch.setattr(limits, "ONNX_MEMORY_BYTES", 4 << 30)
    model = onnx_model.load_onnx(expand(1 << 23), "expand.onnx", "cpu")  # the same model within the default cap
    logits = onnx_model.compute_logits(model, np.zeros((4, 8, 8, 1), np.uint8), Normalization((0.5,), (0.5,)))
    assert logits.shape == (4, 10)


# ---------------------------------------------------------------------------------------------------- time


def test_a_loop_of_2_62_iterations_ends_within_the_time_limit(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(limits, "ONNX_BATCH_SECONDS", 2.0)
    began = time.monotonic()
    status, err = _cli(tmp_path, endless_loop(), capfd)
    line = _one_line(err)
    assert time.monotonic() - began < GENEROUS_S
    assert status == 2 and "took more than 2 s running a batch" in line and "ONNX_BATCH_SECONDS" in line, line


def test_cancel_stops_a_model_inside_its_batch_and_ends_its_process():
    model = onnx_model.load_onnx(endless_loop(), "loop.onnx", "cpu")
    asked: list[int | None] = []

    def cancel() -> bool:  # False before the batch starts (the engine asks too), True once the model runs
        asked.append(model.process.pid)
        return len(asked) > 5

    began = time.monotonic()
    with pytest.raises(Cancelled):
        onnx_model.compute_logits(
            model, np.zeros((10, 8, 8, 1), np.uint8), Normalization((0.5,), (0.5,)), cancel=cancel
        )
    assert time.monotonic() - began < GENEROUS_S and asked[-1] is not None
    assert _gone(asked[-1]) and model.process.pid is None


def test_cancel_in_the_app_ends_an_endless_onnx_job(tmp_path, monkeypatch):
    """The app's path: the upload's background job, cancelled from the jobs panel, ends (it polled only between
    batches, never inside ``InferenceSession.run``)."""
    path = tmp_path / "loop.onnx"
    path.write_bytes(endless_loop())
    running = threading.Event()
    run = onnx_worker.OnnxProcess.run

    def entered(self, *args, **kwargs):
        running.set()
        return run(self, *args, **kwargs)

    monkeypatch.setattr(onnx_worker.OnnxProcess, "run", entered)
    job = jobs.MANAGER.submit(
        "hostile:onnx-loop", "an endless ONNX model", lambda p, c: runs.onnx_run(path, "digits", device="cpu", cancel=c)
    )
    try:
        assert running.wait(GENEROUS_S), job.error  # its first batch is running
        began = time.monotonic()
        job.cancel("test")
        assert job.wait(GENEROUS_S) and job.state == jobs.CANCELLED, (job.state, job.error)
        assert time.monotonic() - began < GENEROUS_S / 3
    finally:
        jobs.MANAGER.cancel(job.key)
        jobs.MANAGER.forget(job.key)


# ---------------------------------------------------------------------------------------- nodes and batches


def test_a_graph_of_too_many_operators_is_refused_before_onnxruntime_sees_it(tmp_path, capfd, monkeypatch):
    assert limits.MAX_ONNX_NODES < 1_000_000  # a million Identity nodes took 3.5 GB to load
    monkeypatch.setattr(limits, "MAX_ONNX_NODES", 1000)
    started = []
    monkeypatch.setattr(onnx_worker.OnnxProcess, "start", lambda *a, **k: started.append(a))
    status, err = _cli(tmp_path, identities(999), capfd)
    line = _one_line(err)
    assert status == 2 and "has 1,001 operators, more than the limit of 1,000" in line and not started, line
    body = onnx.load_model_from_string(endless_loop())  # a Loop's body counts: 2 + 1 + 2 operators
    monkeypatch.setattr(limits, "MAX_ONNX_NODES", 4)
    with pytest.raises(InputError, match="has 5 operators"):
        onnx_model.check_onnx(body.SerializeToString(), "loop.onnx")


def test_a_fixed_batch_of_2_31_images_is_refused_in_one_line(tmp_path, capfd):
    status, err = _cli(tmp_path, _classifier(batch=2**31 - 1), capfd)
    line = _one_line(err)
    assert status == 2 and "fixed batch of 2,147,483,647 images" in line and "free batch axis" in line, line


def test_a_fixed_batch_within_the_limit_is_padded_and_runs(tmp_path, capfd):
    status, err = _cli(tmp_path, _classifier(batch=7), capfd)
    assert status == 0, err


# -------------------------------------------------------------------------------------------------- messages


def test_an_output_of_strings_is_named_not_an_unexpected_error(tmp_path, capfd):
    cast = helper.make_node("Cast", ["logits"], ["out"], to=TensorProto.STRING)
    status, err = _cli(tmp_path, _classifier([cast], output="out", out_type=TensorProto.STRING), capfd)
    line = _one_line(err)
    assert status == 2 and "text, not numbers" in line and "float (N, classes)" in line, line


def test_an_opset_the_runtime_lacks_is_named_without_its_internals(tmp_path, capfd):
    status, err = _cli(tmp_path, _classifier(opset=99), capfd)
    line = _one_line(err)
    newest = onnx.defs.onnx_opset_version()
    assert status == 2 and f"uses ONNX opset 99, newer than the opsets up to {newest}" in line, line
    assert "export it again with opset" in line and "std::" not in line


@pytest.mark.parametrize(
    "metadata, phrase",
    [
        ({"mean": "0.5", "std": "abc"}, "carries its own normalisation metadata, which must give both"),
        ({"mean": "0.5"}, "carries its own normalisation metadata, which must give both"),
        ({"mean": "0.5", "std": "0"}, "every std positive"),
        ({"mean": "0.5,0.5,0.5", "std": "0.5,0.5,0.5"}, "carries its own normalisation metadata (mean (0.5, 0.5, 0.5)"),
    ],
    ids=["not-numbers", "std-missing", "std-zero", "three-channels-for-grey"],
)
def test_the_files_own_metadata_errors_say_they_come_from_the_file(metadata, phrase, tmp_path, capfd):
    model = onnx.load_model_from_string(_classifier())
    helper.set_model_props(model, metadata)
    status, err = _cli(tmp_path, model.SerializeToString(), capfd)
    line = _one_line(err)
    assert status == 2 and phrase in line and "m.onnx" in line and "metadata" in line, line


def test_onnxruntime_messages_lose_their_internals():
    raw = (
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Expand node. Name:'' Status "
        "Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:360 void* "
        "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) Failed to allocate memory "
        "for requested buffer of size 16000000000\n"
    )
    assert (
        onnx_worker.clean_message(raw)
        == "Expand node: Failed to allocate memory for requested buffer of size 16000000000"
    )
    opset = (
        "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model_load_utils.h:46 void "
        "onnxruntime::model_load_utils::ValidateOpsetForDomain(const std::unordered_map<std::__cxx11::basic_string"
        "<char>, int>&, const onnxruntime::logging::Logger&, bool, const std::string&, int) ONNX Runtime only "
        "*guarantees* support for models stamped with official released onnx opset versions."
    )
    assert onnx_worker.clean_message(opset).startswith("ONNX Runtime only *guarantees* support")
    plain = "/onnxruntime_src/onnxruntime/core/x.cc:12 the input (images) has rank 3"
    assert onnx_worker.clean_message(plain) == "the input (images) has rank 3"  # no signature: the words stay


def test_a_good_model_still_runs_and_its_process_ends_with_it():
    model = onnx_model.load_onnx(_classifier(), "good.onnx", "cpu")
    pid = model.process.pid
    logits = onnx_model.compute_logits(model, np.zeros((5, 8, 8, 1), np.uint8), Normalization((0.5,), (0.5,)))
    assert logits.shape == (5, 10) and np.isfinite(logits).all() and pid is not None
    del model
    deadline = time.monotonic() + GENEROUS_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


@pytest.mark.parametrize(
    "command",
    [["baselines", "--methods", "msp,doctor,relu"], ["study", "ablation", "--lambdas", "0.5"]],
    ids=["baselines", "study"],
)
def test_baselines_and_studies_take_an_onnx_model_without_model(command, tmp_path, capfd):
    """They asked for ``--model`` (which an ONNX file never takes); now they run it, as evaluate does."""
    path = tmp_path / "m.onnx"
    path.write_bytes(_classifier())
    argv = [*command, "--weights", str(path), "--seeds", "1", "--bootstrap", "0"]
    assert cli.main([*argv, "--dataset", "digits"]) == 0, capfd.readouterr().err
    out, err = capfd.readouterr()
    assert "Rel-U" in out and "warning" not in err, err
    assert cli.main(argv) == 2
    line = _one_line(capfd.readouterr().err)
    assert "--weights FILE.onnx needs --dataset" in line and "--model" not in line, line
