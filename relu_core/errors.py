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


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's message on one line (whitespace and terminal colour codes removed), or its type name
    when it has none."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_message(exc: BaseException) -> str:
    """The first line of a user error's message (its summary), or its type name when it has none."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def unexpected(exc: BaseException, task: str = "the job") -> str:
    """Log ``exc`` with its traceback under a short reference id and return the one line a user sees.

    For failures that are not bad input (a bug, an exhausted resource): the server log holds the details,
    the user gets ``unexpected error in <task> (reference <id>): <type>: <message>`` to quote.
    """
    reference = secrets.token_hex(4)
    LOGGER.error("unexpected error in %s (reference %s)", task, reference, exc_info=exc)
    return f"unexpected error in {task} (reference {reference}): {type(exc).__name__}: {one_line(exc, 160)}"
