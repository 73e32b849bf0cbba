"""Work shared by several sessions' threads at once (issue 37, roots 1 and 12).

- A cached plotly figure (a view's D*, a run's confusion matrix) is shared by every browser session;
  ``go.Figure(shared)`` takes each trace's ``type`` out of the *source* while it copies, so four threads copying
  one confusion matrix failed after one copy (``Invalid property ... Scatter: 'colorscale'``). Figures are copied
  with ``figures.copy_figure``, which only reads the source, and no code copies a figure with ``go.Figure(fig)``.
- CPython 3.11's AST constructor is not thread-safe (``SystemError: AST constructor recursion depth mismatch``
  once in ~190 AppTest sessions: numpy's npz reader calls ``ast.literal_eval`` in a job thread while Streamlit
  parses a page). ``relu_core.npz`` reads .npy headers with its own strict parser: every header numpy writes is
  read as numpy reads it, hostile headers are refused, and no npz read reaches ``ast``.
"""

from __future__ import annotations

import ast
import io
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from relu_core import cache, corruptions, figures, npz, paths, runs
from relu_core.datasets import formats
from relu_core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def _in_threads(work, n: int = 4) -> list[BaseException]:
    """Runs ``work()`` in ``n`` threads released together; the exceptions they raised."""
    barrier = threading.Barrier(n)
    failures: list[BaseException] = []

    def run() -> None:
        barrier.wait()
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - every failure is the test's result
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


# ----------------------------------------------------------------------------------------- shared figures


def _shared_figures():
    rng = np.random.default_rng(0)
    names = [f"class {k}" for k in range(12)]
    confusion = figures.confusion_heatmap(rng.integers(0, 40, (12, 12)), names)
    dstar = figures.dstar_heatmap(rng.random((12, 12)), names)
    return {"confusion": confusion, "dstar": dstar}


@pytest.mark.parametrize("name", ["confusion", "dstar"])
def test_a_shared_figure_copied_in_four_threads_at_once(name):
    shared = _shared_figures()[name]
    before = shared.to_json()
    types = [trace.type for trace in shared.data]
    copies: list = []

    def copy_and_draw() -> None:
        for _ in range(25):
            small = figures.copy_figure(shared).update_layout(height=200)
            small.update_traces(showscale=False, selector={"type": "heatmap"})
            copies.append([trace.type for trace in small.data])
            shared.to_json()  # another session drawing the shared figure meanwhile

    assert _in_threads(copy_and_draw) == []
    assert len(copies) == 100 and all(found == types for found in copies)
    assert shared.to_json() == before  # the shared figure is unchanged by its copies


def test_a_copy_equals_its_source_and_changes_alone():
    shared = _shared_figures()["confusion"]
    copy = figures.copy_figure(shared)
    assert copy.to_json() == shared.to_json()
    copy.update_layout(height=123).update_traces(showscale=False, selector={"type": "heatmap"})
    assert shared.layout.height == figures.MATRIX_HEIGHT and shared.data[1].showscale is None


def _figure_copies(path: Path) -> list[str]:
    """``go.Figure(x)`` / ``Figure(x)`` calls in ``path`` whose first argument is not a list or dict literal: a
    copy of a figure that writes into its source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "Figure" and not isinstance(node.args[0], (ast.List, ast.Dict)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_code_copies_a_figure_with_go_figure():
    files = [
        ROOT / "app.py",
        *(path for d in ("relu_core", "studio", "app_pages") for path in (ROOT / d).rglob("*.py")),
    ]
    assert [hit for path in files for hit in _figure_copies(path)] == []


# --------------------------------------------------------------------------------------- .npy headers


def _npy(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def _numpy_header(data: bytes) -> tuple:
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    return reader[version](stream)


DTYPES = [
    "<f4",
    ">f8",
    "<f2",
    "<i8",
    ">i2",
    "u1",
    "?",
    "<c16",
    "<U7",
    "|S3",
    "<U0",
    "|V4",
    "<M8[ns]",
    "<m8[s]",
    np.dtype([("a", "<i4"), ("b", ">f8", (2, 3))]),
    np.dtype([("x", [("y", "u1"), ("z", "<U2")])]),
    np.dtype({"names": ["a", "b"], "formats": ["<i2", "<f4"], "offsets": [0, 8], "itemsize": 16}),
    np.dtype([(("a title with 'quotes' and\ta tab", 'n"ame\u00e9\x01'), "<i4")]),
    np.dtype((np.float32, (2,))),
]
SHAPES = [(), (0,), (3,), (3, 4), (2, 0, 5), (1, 1, 1, 1), (2, 3, 1, 2, 1, 2)]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values field by field (padding bytes between fields are left uninitialised by numpy)."""
    if a.dtype.names:
        return all(_same(a[name], b[name]) for name in a.dtype.names)
    return a.tobytes() == b.tobytes()


def _filled(dtype, shape, order: str) -> np.ndarray:
    """An array of ``dtype`` and ``shape`` in ``order`` whose elements differ (zeros for structured dtypes)."""
    array = np.zeros(shape, dtype=dtype, order=order)
    if array.dtype.names or not array.dtype.itemsize or not array.size:
        return array
    if array.dtype.kind in "fciub":
        array.flat = np.arange(array.size) % 2 if array.dtype.kind == "b" else np.arange(array.size)
    elif array.dtype.kind in "US":
        array.flat = [f"s{k}" for k in range(array.size)]
    else:  # void, datetime, timedelta: any bytes
        raw = np.random.default_rng(array.size).integers(0, 255, array.nbytes, dtype=np.uint8)
        array = np.frombuffer(raw.tobytes(), dtype=array.dtype).reshape(shape).copy(order=order)
    return array


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_header_numpy_writes_is_read_as_numpy_reads_it(dtype):
    for shape in SHAPES:
        for order in "CF":
            array = _filled(dtype, shape, order)
            for version in (None, (2, 0), (3, 0)):
                data = _npy(array, version)
                shape_read, fortran, dtype_read, length = npz.read_header(io.BytesIO(data))
                if version != (3, 0):
                    assert (shape_read, fortran, dtype_read) == _numpy_header(data), (dtype, shape, order)
                assert length == len(data) - array.nbytes
                got, expected = npz._read_array(io.BytesIO(data)), np.load(io.BytesIO(data))
                assert got.dtype == expected.dtype and got.shape == expected.shape, (dtype, shape, order)
                assert got.flags.f_contiguous == expected.flags.f_contiguous and _same(got, expected)


def test_python_2_headers_are_read_as_numpy_reads_them():
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4L), }"
    assert npz.parse_header(text, (1, 0)) == ((3, 4), False, np.dtype("<f8"))
    with pytest.raises(ValueError):
        npz.parse_header(text, (3, 0))


HOSTILE_HEADERS = {
    "code": "__import__('os').system('echo owned')",
    "call-in-descr": "{'descr': str('<f4'), 'fortran_order': False, 'shape': (3,)}",
    "extra-key": "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",
    "missing-key": "{'descr': '<f4', 'shape': (3,)}",
    "repeated-key": "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (3,)}",
    "not-a-dict": "('<f4', False, (3,))",
    "shape-a-list": "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}",
    "shape-negative": "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}",
    "shape-a-bool": "{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}",
    "shape-a-float": "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,)}",
    "shape-hex": "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,)}",
    "shape-underscores": "{'descr': '<f4', 'fortran_order': False, 'shape': (1_000,)}",
    "shape-huge-literal": "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",)}",
    "shape-an-expression": "{'descr': '<f4', 'fortran_order': False, 'shape': (2**64,)}",
    "fortran-an-int": "{'descr': '<f4', 'fortran_order': 1, 'shape': (3,)}",
    "descr-unknown": "{'descr': '<q99', 'fortran_order': False, 'shape': (3,)}",
    "descr-a-number": "{'descr': 7, 'fortran_order': False, 'shape': (3,)}",
    "deep-nesting": "{'descr': " + "[" * 5000 + "]" * 5000 + ", 'fortran_order': False, 'shape': (3,)}",
    "unterminated-string": "{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}",
    "bad-escape": "{'descr': '<f\\q4', 'fortran_order': False, 'shape': (3,)}",
    "text-after": "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} + 1",
    "a-set": "{'descr': '<f4', 'fortran_order': False, 'shape': {3}}",
    "empty": "",
    "too-long": "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}" + " " * npz.MAX_HEADER_CHARS,
    "nul": "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\x00",
}


@pytest.mark.parametrize("name", list(HOSTILE_HEADERS))
def test_hostile_headers_are_refused_with_a_value_error(name):
    with pytest.raises(ValueError, match="header"):
        npz.parse_header(HOSTILE_HEADERS[name])


def test_a_hostile_header_in_an_upload_is_one_line():
    header = HOSTILE_HEADERS["deep-nesting"].encode("latin1")
    member = npz.NPY_MAGIC + b"\x02\x00" + len(header).to_bytes(4, "little") + header
    buffer = io.BytesIO()
    np.savez(buffer, labels=np.zeros(3, int))
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("logits.npy", member)
    with pytest.raises(InputError, match="member 'logits.npy' is not a valid .npy array") as caught:
        runs.load_logits_upload(buffer.getvalue(), "deep.npz")
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------------- no ast in job threads


@pytest.fixture()
def ast_calls(monkeypatch) -> list[str]:
    """Every call of ``ast.parse`` / ``ast.literal_eval`` from now on (``literal_eval`` calls ``ast.parse``)."""
    calls: list[str] = []
    parse, literal_eval = ast.parse, ast.literal_eval

    def recording_parse(*args, **kwargs):
        calls.append(f"ast.parse in {threading.current_thread().name}")
        return parse(*args, **kwargs)

    def recording_literal_eval(*args, **kwargs):
        calls.append(f"ast.literal_eval in {threading.current_thread().name}")
        return literal_eval(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", recording_parse)
    monkeypatch.setattr(ast, "literal_eval", recording_literal_eval)
    return calls


def test_reading_npz_files_in_threads_never_reaches_ast(ast_calls, tmp_path, monkeypatch):
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 25)
    logits = (rng.normal(size=(100, 4)) + 3 * np.eye(4)[labels]).astype(np.float32)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, logits=logits, labels=labels, class_names=np.array(["a", "b", "c", "d"]))
    upload = buffer.getvalue()
    cache.save("threads", "entry", {"logits": logits, "labels": labels})
    images = rng.integers(0, 255, (10, 4, 4, 3), dtype=np.uint8)
    np.save(tmp_path / "images.npy", images)
    np.savez(tmp_path / "data.npz", x=images, y=labels[:10])

    def read_everything() -> None:
        for _ in range(5):
            run = runs.load_logits_upload(upload, "upload.npz")
            assert np.array_equal(run.logits, logits) and list(run.class_names) == ["a", "b", "c", "d"]
            stored = cache.load("threads", "entry")
            assert stored is not None and np.array_equal(stored["logits"], logits)
            arrays = formats.load_npz_arrays(tmp_path / "data.npz", ("x", "y"), label="data.npz")
            assert np.array_equal(arrays["x"], images)
            assert np.array_equal(npz.open_npy(tmp_path / "images.npy"), images)

    assert _in_threads(read_everything) == []
    assert ast_calls == []
    assert corruptions.npz is npz  # the corruptions' .npy files are read by the same reader
