"""Exceptions shared by every module of ``relu_core``, and the one-line message of any failure."""

from __future__ import annotations

import logging
import re
import secrets

LOGGER = logging.getLogger("relu_core")


class InputError(ValueError):
    """Bad user input (file, array, option): the message is one readable line for the CLI and the app.

    Examples
    --------
    >>> import relu_core as rc
    >>> try:
    ...     rc.auroc([0.1, 0.2], [True, True])
    ... except rc.InputError as exc:
    ...     print(exc)
    AUROC is undefined: every sample is correctly classified (no errors to detect)
    """


class Cancelled(Exception):
    """A long computation stopped because its ``cancel()`` callback returned True."""


#: Exceptions whose message is bad input, shown to the user as one line (anything else is ``unexpected``).
USER_ERRORS = (InputError, ValueError, FileNotFoundError, OSError)


# terminal escape sequences (colours, cursor moves, window titles) and the control characters that are not
# line breaks or tabs, bidirectional overrides included: a model's exception or a folder name can hold them
_CONTROLS = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
# PyTorch's refusal of a pickle advises loading it with weights_only=False or allowlisting its globals: both
# would run the file's code, so only its reason (after "WeightsUnpickler error:") is passed on
_TORCH_REFUSAL = re.compile(r"Weights only load failed\..*", re.DOTALL)
_TORCH_REASON = re.compile(
    r"WeightsUnpickler error:\s*(.*?)\.?(?:\s*Please use `torch\.serialization|\s*Check the documentation|$)", re.DOTALL
)


def _torch_reason(match: re.Match) -> str:
    found = _TORCH_REASON.search(match.group(0))
    return (found.group(1).strip() if found else "") or "it holds something other than tensors"


def printable(text: str) -> str:
    """``text`` as a message may show it (the one cleaning of every message the app and the CLI print): no
    terminal escape sequence or control character, and none of PyTorch's advice to load a refused file
    unsafely (``weights_only=False``)."""
    return _TORCH_REFUSAL.sub(_torch_reason, _CONTROLS.sub("", text))


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's message on one line (:func:`printable`, whitespace collapsed), or its type name when it
    has none."""
    text = " ".join(printable(str(exc)).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_message(exc: BaseException) -> str:
    """The first line of a user error's message (its summary, :func:`printable`), or its type name when it has
    none."""
    lines = printable(str(exc)).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


def unexpected(exc: BaseException, task: str = "the job") -> str:
    """Log ``exc`` with its traceback under a short reference id and return the one line a user sees.

    For failures that are not bad input (a bug, an exhausted resource): the server log holds the details,
    the user gets ``unexpected error in <task> (reference <id>): <type>: <message>`` to quote.
    """
    reference = secrets.token_hex(4)
    LOGGER.error("unexpected error in %s (reference %s)", task, reference, exc_info=exc)
    return f"unexpected error in {task} (reference {reference}): {type(exc).__name__}: {one_line(exc, 160)}"
