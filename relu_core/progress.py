"""The callback types of every long computation: ``progress(done, total, message)`` and ``cancel()``.

``progress`` is called after each unit of work (a batch, an epoch, a file); ``cancel`` is asked before each
and returning True makes the computation raise :class:`relu_core.errors.Cancelled`.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int, str], None]
Cancel = Callable[[], bool]


def report(progress: Progress | None, done: int, total: int, message: str) -> None:
    """Call ``progress`` when one is given."""
    if progress is not None:
        progress(done, total, message)
