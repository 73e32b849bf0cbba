"""Rel-U Studio, the entry point: ``streamlit run app.py``.

Every page is declared here, once, in the order of the navigation; the frame every page shares (browser tab,
the run named by a shared link, the sidebar with its run picker and jobs panel) is drawn here, once, before the
page itself runs (``studio.frame``). The pages live in ``app_pages/``, not ``pages/``: Streamlit treats a
folder named ``pages/`` beside the entry as an old-style multipage app and then runs a page without this script
(ARCHITECTURE.md, "The frame").
"""

import sys

import streamlit as st

# A server's first visit imports torch, plotly and pandas (10-20 s on 2 cores): say so instead of a blank page.
loading = st.empty()
if "studio.frame" not in sys.modules:
    loading.caption("Loading Rel-U Studio (the first visit after the server starts takes 10-20 s)…")

from studio import frame  # noqa: E402 - after the placeholder, on purpose

PAGES = {
    frame.START: st.Page("app_pages/Start.py", title="Start", default=True),
    # the URL paths of the pages/ era (/Explore, ...), so that shared links keep working
    frame.EXPLORE: st.Page("app_pages/Explore.py", title="Explore", url_path="Explore"),
    frame.CORRUPTIONS: st.Page("app_pages/Corruptions.py", title="Corruptions", url_path="Corruptions"),
    frame.STUDIES: st.Page("app_pages/Studies.py", title="Studies", url_path="Studies"),
    frame.BASELINES: st.Page("app_pages/Baselines.py", title="Baselines", url_path="Baselines"),
    frame.OBJECTIVES: st.Page("app_pages/Objectives.py", title="Training objectives", url_path="Objectives"),
    frame.COMPARE: st.Page("app_pages/Compare.py", title="Compare runs", url_path="Compare"),
}

page = st.navigation(list(PAGES.values()))
loading.empty()
frame.draw(page, PAGES)
page.run()
