"""Streamlit glue shared by the pages of Rel-U Studio (the widget-free computations are in ``relu_core``).

``session``: the session-state keys and defaults; ``runs``: this session's runs and the current one;
``jobbox``: background jobs with their progress box, the sidebar's jobs panel, a study page's Run button and
results; ``sidebar``: the sidebar (run picker, data set + model, uploads); ``page``: a study page's header and
download buttons; ``query``: the URL's query parameters.
"""
