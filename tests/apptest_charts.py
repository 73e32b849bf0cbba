"""What ``studio.live_chart``'s components drew in AppTest, in page order, as the browser gets it: the charts
(``{"data", "layout", "config", "clickable", ...}``), the HTML tables (as DataFrames) and HTML texts."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pandas as pd


def charts(at) -> list[dict]:
    return [
        json.loads(json.loads(element.proto.json))
        for element in at.get("bidi_component")
        if element.proto.component_name == "relu_studio_chart"
    ]


class _Tables(HTMLParser):
    """The tables of ``report.table_html`` markup: rows of cells, a float cell as its exact ``data-value``."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list]] = []
        self._cell: list | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            value = dict(attrs).get("data-value")
            self._cell = [float(value)] if value is not None else [""]

    def handle_data(self, data):
        if self._cell is not None and isinstance(self._cell[0], str):
            self._cell[0] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(self._cell[0])
            self._cell = None


def _html_payloads(at) -> list[str]:
    return [
        json.loads(json.loads(element.proto.json))["html"]
        for element in at.get("bidi_component")
        if element.proto.component_name == "relu_studio_html"
    ]


def tables(at) -> list[pd.DataFrame]:
    """The HTML tables a page drew (``studio.live_chart.live_html``), in page order, as DataFrames: the header
    row gives the columns, a first column with an empty header the index; numbers as numbers."""
    frames = []
    for markup in _html_payloads(at):
        parser = _Tables()
        parser.feed(markup)
        for head, *rows in parser.tables:
            frame = pd.DataFrame(rows, columns=head)
            for column in frame.columns[1:] if head[0] == "" else frame.columns:
                try:  # counts are written as integers, without a data-value
                    frame[column] = pd.to_numeric(frame[column])
                except ValueError:
                    continue
            frames.append(frame.set_index("").rename_axis(None) if head[0] == "" else frame)
    return frames


def html_texts(at) -> list[str]:
    """The text of each HTML element a page drew, tags removed."""
    return [html.unescape(re.sub(r"<[^>]+>", "", markup)) for markup in _html_payloads(at)]
