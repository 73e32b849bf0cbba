"""The dashboard under AppTest, always through its entry ``app.py`` (the frame: sidebar, run picker, shared
links), as a browser session reaches a page; page paths are relative to the entry, as ``AppTest.switch_page``
takes them."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from studio.headless import wait_s

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "app.py"
START, EXPLORE, CORRUPTIONS, STUDIES, BASELINES, OBJECTIVES_PAGE, COMPARE = (
    f"app_pages/{name}.py"
    for name in ("Start", "Explore", "Corruptions", "Studies", "Baselines", "Objectives", "Compare")
)


def app(page: str | None = None, timeout: float = 300) -> AppTest:
    """The app, not yet run, opening on ``page`` (one of the paths above; None: the default page, Start).
    A page's file name is its URL path (app.py), so it can be chosen before the first run. ``timeout``, each
    script run's limit on a quiet machine, is scaled to the machine's load now (``studio.headless.wait_s``)."""
    at = AppTest.from_file(str(APP), default_timeout=wait_s(timeout))
    return at.switch_page(page) if page else at
