"""An ONNX model run in a process of its own, bounded in memory and time, and ended at once on cancel.

A valid 3 KB ONNX file can ask for anything at run time (an ``Expand`` of each batch to a huge shape reached
22 GB; a ``Loop`` of 2^62 iterations never ends), and onnxruntime's ``InferenceSession.run`` cannot be stopped
from Python. So :class:`OnnxProcess` (the parent's side) starts ``python -m relu_core.onnx_worker`` (this
module's :func:`main`, the child) and talks to it over its stdin and stdout:

- **memory**: the child caps its own data segment (``RLIMIT_DATA``: the heap and every private writable mapping,
  so an allocation beyond it fails at once, without touching memory) to :data:`relu_core.limits.ONNX_MEMORY_BYTES`
  before it imports onnxruntime; on CUDA, onnxruntime's arena gets the same ``gpu_mem_limit``. A failed allocation
  comes back as one line naming the bytes asked and the limit.
- **time**: starting and making the session must end within :data:`relu_core.limits.ONNX_LOAD_SECONDS`, each
  batch within :data:`relu_core.limits.ONNX_BATCH_SECONDS`, or the child is killed and one line says so.
- **cancel**: the parent waits for each answer in steps of :data:`POLL_S`, asking ``cancel()`` at each; on True
  it kills the child and raises ``Cancelled``.
- **no orphans**: the child ends with the object that started it (garbage collection, exit), when its stdin
  closes, and (Linux) when the thread that started it dies (``PR_SET_PDEATHSIG``), so a killed server leaves no
  model running.
- **no leaks**: onnxruntime's own log (coloured lines, ``/onnxruntime_src/...`` paths) is silenced in the child
  (severity fatal, its stderr a temporary file kept for the server's log), and the messages that come back are
  cleaned of source paths and C++ signatures (:func:`clean_message`).

Nothing is pickled between the two: the child sends a small JSON header and raw array bytes, and only arrays of
numbers are read back. The child imports numpy and onnxruntime only (never torch or the rest of ``relu_core``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO

#: How often the parent asks ``cancel()`` and the clock while the child works, in seconds.
POLL_S = 0.1
#: onnxruntime's log severity in the child: 4 = fatal only (its errors come back as exceptions, cleaned).
QUIET = 4
#: The numeric dtypes an output may come back in (anything else, e.g. strings, is refused by name).
NUMERIC_KINDS = "biuf"

_HEADER = struct.Struct("<I")
_PAYLOAD = struct.Struct("<Q")
_ALLOCATION = re.compile(r"(?:Failed to allocate memory for requested buffer of size|bad_alloc|MemoryError)\s*(\d*)")
_ORT_PREFIX = re.compile(r"\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*")
# a source path and line (/onnxruntime_src/onnxruntime/core/...cc:360), with the C++ signature that follows it
_SOURCE = re.compile(r"\S*onnxruntime_src\S*:\d+\s+(?:[\w:<>,*&~ ]*::~?\w+\([^()\n]*\)\s*(?:const\s+)?)?")
_NODE = re.compile(r"Non-zero status code returned while running (\w+) node\. Name:'([^']*)' Status Message:\s*")


def clean_message(text: str) -> str:
    """onnxruntime's exception text without its internals: no ``[ONNXRuntimeError] : 1 : FAIL :`` prefix, no
    ``/onnxruntime_src/...cc:360`` source paths or the C++ signatures after them, "running Expand node" shortened
    to "Expand node:"; on one line."""
    text = _ORT_PREFIX.sub("", str(text))
    text = _SOURCE.sub("", text)
    text = _NODE.sub(lambda m: f"{m.group(1)} node{' ' + repr(m.group(2)) if m.group(2) else ''}: ", text)
    return " ".join(text.split())


# ------------------------------------------------------------------------------------------ the wire format


def _write(stream: IO[bytes], header: dict, payload: bytes | memoryview = b"") -> None:
    encoded = json.dumps(header).encode()
    payload = memoryview(payload).cast("B")  # bytes, not elements
    stream.write(_HEADER.pack(len(encoded)) + encoded + _PAYLOAD.pack(payload.nbytes))
    if payload.nbytes:
        stream.write(payload)
    stream.flush()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(min(left, 1 << 24))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read(stream: IO[bytes], max_payload: int | None = None, max_header: int = 1 << 20) -> tuple[dict, bytes]:
    (size,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    if size > max_header:
        raise ValueError(f"a header of {size:,} bytes")
    header = json.loads(_read_exactly(stream, size))
    if not isinstance(header, dict):
        raise ValueError("a header that is not an object")
    (length,) = _PAYLOAD.unpack(_read_exactly(stream, _PAYLOAD.size))
    if max_payload is not None and length > max_payload:
        raise ValueError(f"a payload of {length:,} bytes")
    return header, _read_exactly(stream, length)


# ----------------------------------------------------------------------------------------------- the child


def _failure(error: BaseException) -> dict:
    text = clean_message(f"{type(error).__name__}: {error}" if isinstance(error, MemoryError) else str(error))
    allocation = _ALLOCATION.search(text)
    if isinstance(error, MemoryError) or allocation:
        return {
            "ok": False,
            "kind": "memory",
            "bytes": int(allocation.group(1)) if allocation and allocation.group(1) else None,
        }
    if "is under development" in text and "Opset" in text:
        return {"ok": False, "kind": "opset", "message": text}
    return {"ok": False, "kind": "error", "message": text}


def _answer(outputs: list) -> tuple[dict, bytes]:
    import numpy as np

    first = outputs[0] if outputs else None
    if not isinstance(first, np.ndarray):
        return {"ok": False, "kind": "not-a-tensor", "type": type(first).__name__}, b""
    if first.dtype.kind not in NUMERIC_KINDS:
        return {"ok": False, "kind": "not-numbers", "dtype": str(first.dtype)}, b""
    first = np.ascontiguousarray(first)
    return {"ok": True, "dtype": first.dtype.str, "shape": list(first.shape)}, first.tobytes()


def main() -> None:
    """The child: read the settings and the model, cap memory, make the session, then answer batches until its
    stdin ends. Its stdout carries only the protocol (stray prints of native code go to its stderr)."""
    with contextlib.suppress(Exception):  # Linux: killed with its parent (a parent killed hard closes no pipe)
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before that
        return
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    settings, model = _read(requests)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        cap = int(settings["memory_bytes"])
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    try:
        import numpy as np
        import onnxruntime

        onnxruntime.set_default_logger_severity(QUIET)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = QUIET
        options.intra_op_num_threads = int(settings["threads"])
        options.inter_op_num_threads = 1
        providers = [
            (name, {"gpu_mem_limit": int(settings["memory_bytes"])}) if name == "CUDAExecutionProvider" else name
            for name in settings["providers"]
        ]
        session = onnxruntime.InferenceSession(model, sess_options=options, providers=providers)
        del model
    except BaseException as error:  # noqa: BLE001 - every failure is answered, as one line
        _write(protocol, _failure(error))
        return
    _write(protocol, {"ok": True})
    while True:
        try:
            request, data = _read(requests)
        except EOFError:
            return
        try:
            x = np.frombuffer(data, dtype=np.dtype(request["dtype"])).reshape(request["shape"])
            header, payload = _answer(session.run(None, {request["input"]: x}))
        except BaseException as error:  # noqa: BLE001
            header, payload = _failure(error), b""
        del data
        _write(protocol, header, payload)


# ---------------------------------------------------------------------------------------------- the parent


class WorkerFailure(Exception):
    """The child answered with a failure (``kind``: memory, opset, not-a-tensor, not-numbers, error), ended
    (``kind`` "ended", ``returncode``), or was stopped after ``seconds`` (``kind`` "time")."""

    def __init__(self, kind: str, detail: dict | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail or {}


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.kill()
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        process.wait(5)
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError, ValueError):
            stream.close()


class OnnxProcess:
    """The parent's side of one ONNX model's child process (see the module docstring): :meth:`run` one batch;
    the child is started on first use (and again after it was stopped), and killed by :meth:`close`, by garbage
    collection of this object, or at exit."""

    def __init__(self, model: bytes, providers: tuple[str, ...], *, memory_bytes: int, threads: int) -> None:
        self._model = model
        self._settings = {"providers": list(providers), "memory_bytes": int(memory_bytes), "threads": int(threads)}
        self._process: subprocess.Popen | None = None
        self._answers: queue.Queue = queue.Queue()
        self._log: IO[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    @property
    def memory_bytes(self) -> int:
        """The cap on the child's data segment, in bytes."""
        return self._settings["memory_bytes"]

    @property
    def pid(self) -> int | None:
        """The running child's process id (None when none runs)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self, seconds: float, cancel: Callable[[], bool] | None = None) -> None:
        """Start the child and make the session (WorkerFailure when it cannot, or takes over ``seconds``)."""
        if self.pid is not None:
            return
        self.close()
        package_root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        env["MALLOC_ARENA_MAX"] = "2"  # fewer heap arenas: the memory cap counts what the model uses
        self._log = tempfile.TemporaryFile()
        weakref.finalize(self, self._log.close)  # kept after the child ends (log_tail), closed with this object
        process = subprocess.Popen(
            [sys.executable, "-m", "relu_core.onnx_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,  # a Ctrl-C in the terminal reaches the parent, which ends the child
        )
        self._process, self._answers = process, queue.Queue()
        limit = self._settings["memory_bytes"]  # the child cannot hold a larger answer
        threading.Thread(target=self._read_answers, args=(process, self._answers, limit), daemon=True).start()
        self._finalizer = weakref.finalize(self, _kill, process)
        try:
            _write(process.stdin, self._settings, self._model)
        except OSError:
            pass  # the child ended at once: its end is the answer below
        self._answer(seconds, cancel)

    @staticmethod
    def _read_answers(process: subprocess.Popen, answers: queue.Queue, limit: int) -> None:
        try:
            while True:
                answers.put(_read(process.stdout, limit))
        except (EOFError, OSError, ValueError):
            answers.put(None)

    def _answer(self, seconds: float, cancel: Callable[[], bool] | None) -> tuple[dict, bytes]:
        """The child's next answer, waiting at most ``seconds`` and asking ``cancel()`` every :data:`POLL_S`."""
        from relu_core.errors import Cancelled

        deadline = time.monotonic() + seconds
        while True:
            try:
                answer = self._answers.get(timeout=POLL_S)
                break
            except queue.Empty:
                if cancel is not None and cancel():
                    self.close()
                    raise Cancelled("the ONNX model was stopped") from None
                if time.monotonic() > deadline:
                    self.close()
                    raise WorkerFailure("time", {"seconds": seconds}) from None
        if answer is None:
            process = self._process
            code = process.wait(5) if process is not None else None
            self.close()
            raise WorkerFailure("ended", {"returncode": code})
        header, payload = answer
        if not header.get("ok"):
            raise WorkerFailure(str(header.get("kind", "error")), header)
        return header, payload

    def run(
        self,
        input_name: str,
        x,
        seconds: float,
        cancel: Callable[[], bool] | None = None,
        load_seconds: float | None = None,
    ):
        """The model's first output on the batch ``x`` (a numpy array) as a numpy array of numbers: WorkerFailure
        when the model fails, asks for more memory than the cap, returns something else, or takes over
        ``seconds``; ``Cancelled`` when ``cancel()`` turns True meanwhile. A child that was stopped is started
        again first, within ``load_seconds`` (default ``seconds``)."""
        import numpy as np

        with self._lock:
            self.start(seconds if load_seconds is None else load_seconds, cancel)
            x = np.ascontiguousarray(x)
            try:
                _write(self._process.stdin, {"input": input_name, "dtype": x.dtype.str, "shape": list(x.shape)}, x.data)
            except OSError:
                pass  # the child ended: its end is the answer below
            header, payload = self._answer(seconds, cancel)
            dtype = np.dtype(header["dtype"])
            shape = tuple(int(n) for n in header["shape"])
            if dtype.kind not in NUMERIC_KINDS or dtype.itemsize * int(np.prod(shape, dtype=object)) != len(payload):
                raise WorkerFailure("error", {"message": "the model's process sent a malformed answer"})
            return np.frombuffer(payload, dtype=dtype).reshape(shape)

    def log_tail(self, size: int = 2000) -> str:
        """The end of the child's stderr (for the server's log; never shown to the user)."""
        if self._log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, self._log.tell() - size))
            return self._log.read().decode("utf-8", "replace")
        return ""

    def close(self) -> None:
        """Kill the child (if it runs) and forget it."""
        if self._finalizer is not None:
            self._finalizer()  # kills it once
            self._finalizer = None
        self._process = None


def signal_name(returncode: int | None) -> str:
    """``returncode`` of a child process in words ("signal SIGKILL", "exit status 1")."""
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


if __name__ == "__main__":
    main()
