"""The frame every page is drawn in, by ``app.py`` before the page runs: the browser tab's title, the run a
shared link names (``run=``, on any page, written back for the run shown), the sidebar (run picker, jobs panel,
data set + model, uploads, the shared settings), the link's notice and the running work's progress at the top of
the page. Pages read the run it picked (:func:`current_run`) and switch pages by page object
(:func:`switch_to`)."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from relu_core import cache, runs, scorecard
from studio import jobbox, query, session, sidebar
from studio.text import plain

#: The pages' names, for :func:`switch_to` (app.py declares each page under one of them).
START, EXPLORE, CORRUPTIONS, STUDIES, BASELINES, OBJECTIVES, COMPARE = (
    "start",
    "explore",
    "corruptions",
    "studies",
    "baselines",
    "objectives",
    "compare",
)


#: The prefixes of the job keys whose progress each page shows itself (its progress box, its scorecard, the ε
#: pass's bar), left out of the running work listed at the top.
OWN_JOBS = {
    START: (scorecard.JOB_PREFIX, "paired:"),
    EXPLORE: ("eps:", "paired:"),
    CORRUPTIONS: (f"{session.CORRUPTIONS_PAGE}:",),
    STUDIES: (f"{session.STUDIES_PAGE}:",),
    BASELINES: (f"{session.BASELINES_PAGE}:",),
    OBJECTIVES: (f"{session.OBJECTIVES_PAGE}:",),
    COMPARE: (f"{session.COMPARE_PAGE}:",),
}


def draw(page, pages: Mapping[str, object]) -> None:
    """The frame around ``page`` (the page ``st.navigation`` chose among ``pages``, keyed by the names above).
    May stop the script run (the default run still being prepared, or failed): the page then does not run."""
    title = "Rel-U Studio" if page.title == "Start" else f"{page.title} · Rel-U Studio"
    st.set_page_config(page_title=title, layout="wide")
    st.session_state[session.PAGES] = dict(pages)
    status = jobbox.status_area()  # first: a page waiting on a job shows its progress at the top
    query.open_run_from_query()  # a shared link names its run: open it before anything else is prepared
    sidebar.sidebar_run_picker(page.title)
    run = current_run()
    query.write_run_param(run)  # a link copied from any page names the run it shows
    with st.sidebar:
        st.session_state[session.SHARED_SLOT] = st.empty()
    session.show_shared()  # written again whenever a page ties its widgets to them (session.share)
    query.query_run_notice()
    cache_notice()
    name = next((n for n, p in pages.items() if p == page), START)
    jobbox.running_work(status, OWN_JOBS[name])  # the other running work, at the top of every page


def cache_notice() -> None:
    """One line at the top of every page while the cache cannot be written (a full disk: what is computed works,
    it is only not kept; :func:`relu_core.cache.write_failure`)."""
    notice = cache.write_failure()
    if notice:
        st.warning(plain(notice))


def current_run():
    """The run the frame picked for this script run (the sidebar's current run, or the default one); fragment
    reruns read it again, so it is looked up by id (InputError when the bounded registry has dropped it)."""
    return runs.get_run(st.session_state[session.RUN_ID])


def switch_to(name: str) -> None:
    """Go to the page declared in app.py under ``name`` (one of the names above)."""
    st.switch_page(st.session_state[session.PAGES][name])
