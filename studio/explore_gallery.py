"""Explore's image galleries: the samples of a confusion cell, the errors one detector catches and the other
misses; images captioned with their classes and scores (a table for a run of logits only), a page at a time with
a "Show more" button. The samples come from ``relu_core.explore``'s view; this module draws them and keeps how many
each gallery shows in the session."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from relu_core import cache, explore
from studio import session
from studio.text import plain


def _shown_count(name: str, indices: np.ndarray, page_size: int) -> int:
    """How many of ``indices`` the gallery ``name`` shows: ``page_size``, more after each "Show more", back to
    ``page_size`` when its samples change (another cell, split or setting)."""
    digest = cache.array_digest(indices)
    shown = st.session_state.setdefault(session.EX_GALLERY_SHOWN, {})
    if shown.get(name, (None,))[0] != digest:
        shown[name] = (digest, page_size)
    return shown[name][1]


def _show_more(name: str, page_size: int) -> None:
    digest, count = st.session_state[session.EX_GALLERY_SHOWN][name]
    st.session_state[session.EX_GALLERY_SHOWN][name] = (digest, count + page_size)


def gallery(
    run,
    indices: np.ndarray,
    view: explore.View,
    keys,
    *,
    name: str,
    page_size: int = 24,
    columns: int = 8,
    name_classes: bool = True,
) -> None:
    """Images (or a table for logits-only runs) captioned with their index, true → predicted class (unless
    ``name_classes`` is False: a confusion cell's samples share them) and each detector's score: ``page_size`` of
    them, and as many more on each press of its "Show more" button (``name`` tells the page's galleries apart)."""
    limit = _shown_count(name, indices, page_size)  # first: an empty cell between two visits resets it too
    if indices.size == 0:
        st.info("No samples here.")
        return
    shown, names, labels = indices[:limit], view.class_names, run.labels
    if run.images is None:
        table = pd.DataFrame(
            {
                "sample": shown,
                "true": [names[labels[i]] for i in shown],
                "predicted": [names[view.predictions[i]] for i in shown],
            }
        )
        for key in keys:
            table[view.detectors[key].name] = view.detectors[key].uncertainty[shown]
        st.dataframe(table, hide_index=True)
    else:
        grid = st.columns(columns)
        for n, i in enumerate(shown):
            classes = [f"{names[labels[i]]} → {names[view.predictions[i]]}"] if name_classes else []
            scores = [f"{view.detectors[k].name} {view.detectors[k].uncertainty[i]:.3g}" for k in keys]
            grid[n % columns].image(
                explore.thumbnail(run.images[i]), caption=plain(" · ".join([f"#{i}", *classes, *scores]))
            )
    if indices.size > limit:
        row = st.container(horizontal=True, vertical_alignment="center")
        row.caption(f"showing {limit} of {indices.size}")
        row.button(
            f"Show {min(page_size, indices.size - limit)} more",
            key=session.item_key(session.EX_GALLERY_MORE, name),
            on_click=_show_more,
            args=(name, page_size),
        )
