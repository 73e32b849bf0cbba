"""Every CSV the app, the CLI and the report write: Python's ``csv`` writer (quotes, commas and newlines in a
class name stay inside their cell) and text cells that a spreadsheet cannot take for a formula.

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (what spreadsheets read as a
formula) or with an apostrophe gets one apostrophe put in front (``=SUM(A1)`` -> ``'=SUM(A1)``, ``'x`` -> ``''x``),
as spreadsheets themselves mark text. Numbers are written as numbers (``-0.5`` stays ``-0.5``). Reading a text
cell back, :func:`read_cell` drops one leading apostrophe, so every text round-trips exactly.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

#: The first characters of a text cell that a spreadsheet would evaluate (and the apostrophe that marks text).
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r", "'")


def cell(value: object) -> object:
    """``value`` as written to a CSV cell: a text that could be read as a formula gets an apostrophe in front;
    floats as their exact ``repr``; anything else unchanged."""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_LEADS) else value
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return value


def read_cell(text: str) -> str:
    """The text :func:`cell` wrote as ``text`` (one leading apostrophe dropped)."""
    return text[1:] if text.startswith("'") else text


def rows_csv(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A header and rows as CSV text (each cell through :func:`cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([cell(v) for v in header])
    writer.writerows([cell(v) for v in row] for row in rows)
    return out.getvalue()


def frame_csv(frame: pd.DataFrame, index: bool = False) -> str:
    """A data frame as CSV text (pandas' writer; text cells, column names and the index through :func:`cell`)."""
    safe = frame.rename(columns=lambda c: cell(c) if isinstance(c, str) else c)
    safe = safe.rename(index=lambda i: cell(i) if isinstance(i, str) else i)
    if isinstance(safe.index.name, str):
        safe.index.name = cell(safe.index.name)
    for j, dtype in enumerate(safe.dtypes):
        if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
            safe.iloc[:, j] = safe.iloc[:, j].map(lambda v: cell(v) if isinstance(v, str) else v)
    return safe.to_csv(index=index, lineterminator="\n")
