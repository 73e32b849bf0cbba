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


#: Resolution of :func:`within`: the steps of one outer step.
WITHIN_STEPS = 1000


def within(progress: Progress, step: int, total: int) -> Progress:
    """A ``progress`` for the inner work of outer step ``step`` of ``total``: its ``done / total`` moves the
    outer bar from ``step`` to ``step + 1`` (in :data:`WITHIN_STEPS` steps), with the inner message."""

    def inner(done: int, inner_total: int, message: str) -> None:
        fraction = min(max(done / inner_total, 0.0), 1.0) if inner_total else 0.0
        progress(round((step + fraction) * WITHIN_STEPS), total * WITHIN_STEPS, message)

    return inner


def count(n: int, noun: str) -> str:
    """``n`` ``noun``s in words: "1 seed", "3 seeds", "1,000 images" (regular plurals only)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def duration_words(seconds: float) -> str:
    """An estimated duration, rounded as an estimate deserves: "about 40 s", "about 4 min", "about 2 h"."""
    if seconds < 90:
        return f"about {max(1, round(seconds, -1) if seconds >= 20 else round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h".replace(".0 h", " h")
