"""Rel-U Studio core library: detectors, metrics, evaluation protocol, models, data and the logits engine.

Nothing in this package imports Streamlit; the app in ``app.py`` and ``app_pages/`` is a thin layer on top.
"""

__version__ = "0.1.0"
