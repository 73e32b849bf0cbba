"""Rel-U Studio, start page ("Start" in the navigation): the current run at a glance, D* beside its confusion
matrix and the Rel-U vs Doctor verdict at the default settings, then a button to explore.

Part of ``streamlit run app.py``; with no choice made the default run (Fashion-MNIST when it is on the
machine, else digits, with a small CNN trained here on first use, then cached) is prepared in the background.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from relu_core import explore, metrics
from relu_core.errors import InputError
from studio import frame, jobbox, page, session
from studio.text import plain

START_HEIGHT = 400  # pixels per matrix figure
NO_MODEBAR = {"displayModeBar": False}

run = frame.current_run()

st.markdown("### Rel-U Studio: when should a prediction not be trusted?")
setting = explore.Setting()  # the defaults, fixed in advance (Explore opens on them too)
try:
    view = explore.view(run, setting)
    explore.ensure_paired(view)
except InputError as exc:  # a run that cannot be evaluated (uploads are checked, but a cached run may not be)
    jobbox.show_error(exc)
    st.caption("Pick or load another run in the sidebar.")
    st.stop()
st.info(explore.start_verdict(view))

left, right, side = st.columns([5, 5, 2.4])
cm, cm_fig = explore.confusion_figure(run, setting.tune_fraction, setting.seed)
# compact copies (the confusion figure is cached and shared): both matrices fit above the fold at 1280 x 720
compact = {"height": START_HEIGHT, "margin": {"t": 40, "b": 10, "l": 10, "r": 10}}
with left:
    small_dstar = go.Figure(view.heat).update_layout(**compact).update_traces(colorbar_thickness=12)
    page.chart(st, small_dstar, "dstar", key=session.START_DSTAR, config=NO_MODEBAR)
with right:
    # no colour bar: the counts are written in the cells, and the matrix gets its width (about 110 px wide with it)
    small_cm = go.Figure(cm_fig).update_layout(**compact).update_traces(showscale=False, selector={"type": "heatmap"})
    page.chart(st, small_cm, "confusion", key=session.START_CONFUSION, config=NO_MODEBAR)
with side:
    n, c = run.logits.shape
    errors = int((np.argmax(run.logits, 1) != run.labels).sum())
    st.metric("accuracy", f"{metrics.accuracy(run.logits, run.labels):.2%}")
    # short values: the side column is ~175 px wide at 1280 x 720, and a metric's value does not wrap
    st.metric(f"errors of {n:,}", f"{errors:,}")
    st.metric("errors, evaluation split", f"{int((~view.correct_eval).sum()):,}")
    if st.button("Explore this run", type="primary", key=session.START_EXPLORE):
        frame.switch_to(frame.EXPLORE)

st.caption(
    f"Run: {plain(run.source or 'uploaded logits')} · {n:,} samples × {c} classes · run id `{run.run_id}`. "
    "D* (left) is Rel-U's learned matrix: entry (i, j) is large when the model's errors spread probability over "
    "classes i and j together; the confusion matrix (right, counts; grey: correct predictions) shows which classes "
    "the model actually confuses. "
    "Both come from the tuning half of the samples; the verdict is measured on the other half. The default "
    "settings were fixed in advance, not tuned: Explore moves them live, Studies sweeps them and Corruptions "
    "selects them on a clean tuning split, as the paper does."
)
with st.expander("About Rel-U Studio and other runs"):
    st.markdown(
        "Misclassification detection with **Rel-U** (Dadalto et al., ICLR 2024), a data-driven relative "
        "uncertainty `pᵀ D* p` whose matrix D* is learned from the soft predictions of correct and wrong "
        "samples, compared live with **Doctor** (the Gini impurity, i.e. D = all ones off the diagonal) "
        "and the usual baselines (MSP, ODIN, Entropy, Energy).\n\n"
        "Use the sidebar: **Data set + model** computes the logits of a registered data set found on this "
        "machine (CIFAR-10 with the pretrained CIFAR ResNets when their weights are present; Fashion-MNIST, "
        "MNIST and digits with a small CNN trained here on demand), or downloads a torchvision set when online. "
        "**Upload logits** loads precomputed logits (npz with `logits` and `labels`, or csv / parquet with one "
        "column per class and a `label` column). **Upload model + data set** runs your checkpoint (TorchScript "
        "or a state dict for a listed architecture) on an image-folder zip, an npz, or a registered set. "
        "Long work runs as a background job (sidebar): it goes on when you change page. Logits are cached by "
        "content, so a run computed once loads instantly afterwards."
    )
