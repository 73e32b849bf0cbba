"""The frame (app.py, studio/frame.py): every page is declared once in app.py and reached through it, so the
sidebar, the run picker and a shared link's run are there on every page and on every rerun."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from apptest_pages import APP, BASELINES, COMPARE, CORRUPTIONS, EXPLORE, OBJECTIVES_PAGE, REPO, START, STUDIES, app

TIMEOUT = 300


def _declared_pages() -> list[str]:
    """The page files app.py declares with ``st.Page``, in order."""
    calls = [node for node in ast.walk(ast.parse(APP.read_text())) if isinstance(node, ast.Call)]
    return [
        call.args[0].value
        for call in calls
        if isinstance(call.func, ast.Attribute) and call.func.attr == "Page" and call.args
    ]


def test_every_page_is_declared_once_in_app_py_and_no_pages_folder_exists():
    declared = _declared_pages()
    assert declared == [START, EXPLORE, CORRUPTIONS, STUDIES, BASELINES, OBJECTIVES_PAGE, COMPARE]
    assert sorted(declared) == sorted(f"app_pages/{p.name}" for p in (REPO / "app_pages").glob("*.py"))
    # Streamlit 1.67 runs a folder named pages/ beside the entry as an old-style multipage app: AppTest then
    # skips app.py on every rerun, and a fresh server's first visit to /Explore shows "Page not found"
    assert not (REPO / "pages").exists()
    assert not (REPO / "Start.py").exists()


def _sidebar_is_drawn(at) -> bool:
    return any(h.value == "Run" for h in at.sidebar.header) and bool(at.sidebar.selectbox(key="pick_dataset"))


@pytest.mark.slow
def test_reruns_go_through_the_entry_on_every_page(digits_run):
    from relu_core import runs

    runs.register_run(digits_run)
    for page in (START, EXPLORE, CORRUPTIONS, STUDIES, BASELINES, OBJECTIVES_PAGE, COMPARE):
        at = app(page, TIMEOUT)
        at.session_state["run_id"] = digits_run.run_id
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])
        for _ in range(2):  # the trap of a pages/ folder: the entry ran on the first run only
            assert _sidebar_is_drawn(at), page
            at.run()
        assert at.session_state["run_id"] == digits_run.run_id


@pytest.mark.slow
def test_start_switches_to_explore_by_page_object(digits_run):
    from relu_core import runs

    runs.register_run(digits_run)
    at = app(timeout=TIMEOUT)
    at.session_state["run_id"] = digits_run.run_id
    at.run()
    at.button(key="start_explore").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.subheader[0].value == "Explore: Rel-U vs Doctor"
    assert _sidebar_is_drawn(at)


@pytest.mark.slow
@pytest.mark.parametrize("page", [START, EXPLORE, CORRUPTIONS, STUDIES, BASELINES, OBJECTIVES_PAGE, COMPARE])
def test_a_shared_link_opens_its_run_on_any_page(page, digits_run):
    from relu_core import runs

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, 200)
    logits = rng.normal(size=(200, 4)).astype(np.float32) + 2 * np.eye(4, dtype=np.float32)[labels]
    linked = runs.Run.from_logits(logits, labels, tuple("abcd"), source="linked logits")
    runs.register_run(linked)
    runs.register_run(digits_run)
    at = app(page, TIMEOUT)
    at.session_state["run_id"] = digits_run.run_id  # the session was on another run
    at.session_state["run_ids"] = [digits_run.run_id]
    at.query_params["run"] = linked.run_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["run_id"] == linked.run_id
    assert any(linked.source in c.value for c in at.caption) or page in (START, OBJECTIVES_PAGE)
    # the page's own URL names the run it shows, so that a link copied from it opens that run
    assert at.query_params["run"] == linked.run_id and at.query_params["run_name"] == linked.source
    # the session moves to another run: the URL follows it, and the page shows that run's results only
    at.selectbox(key="run_picker").set_value(digits_run.run_id).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["run"] == digits_run.run_id and at.session_state["run_id"] == digits_run.run_id
    assert any(digits_run.source in c.value for c in at.caption) or page in (START, OBJECTIVES_PAGE)
    assert not any(linked.source in c.value for c in at.caption)


@pytest.mark.slow
@pytest.mark.parametrize("page", [START, CORRUPTIONS, STUDIES, BASELINES])
def test_every_page_shows_the_running_work_at_its_top(page, digits_run, monkeypatch):
    import threading

    from relu_core import jobs, runs
    from studio import jobbox

    monkeypatch.setattr(jobbox, "STATUS_AFTER_S", 0.0)
    monkeypatch.setattr(jobbox, "STATUS_MAX", 1000)  # jobs of earlier tests may still run in this process
    release = threading.Event()

    def long_work(progress, cancel):
        progress(1, 4, "step 1 of 4")
        release.wait(120)

    other = jobs.MANAGER.submit("test-status:other", "Somebody's long study", long_work)
    own = jobs.MANAGER.submit("rob:test-status", "This page's own study", long_work)
    try:
        runs.register_run(digits_run)
        at = app(page, TIMEOUT)
        at.session_state["run_id"] = digits_run.run_id
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        # the page's first blocks: app.py's loading line (emptied), then the frame's status area
        top = [block for block in list(at.main.children.values())[:2] if hasattr(block, "get")]
        shown = [element.proto.text for block in top for element in block.get("progress")]
        assert "Running: Somebody's long study (step 1 of 4)" in shown
        # the Corruptions page shows its own study's progress itself (its box), the others list it at the top
        assert ("Running: This page's own study (step 1 of 4)" in shown) == (page != CORRUPTIONS)
    finally:
        release.set()
        for job in (other, own):
            job.wait(60)
            jobs.MANAGER.forget(job.key)


def test_the_sidebar_says_when_the_shared_eps_does_not_apply_to_the_run(digits_run):
    from relu_core import runs
    from studio import session

    logits_only = runs.Run.from_logits(digits_run.logits, digits_run.labels, digits_run.class_names, source="upload")
    for run in (digits_run, logits_only):
        runs.register_run(run)
        at = app(EXPLORE, TIMEOUT)  # not Start: its scorecard would start background studies
        at.session_state["run_id"] = run.run_id
        at.session_state[session.SHARED] = {**vars(session.scorecard.Shared()), "eps": 0.0002}
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        caption = next(c.value for c in at.sidebar.caption if c.value.startswith("**Shared settings**"))
        assert "ε = 0.0002" in caption
        assert ("ε does not apply to this run" in caption) == (run is logits_only), caption


def test_a_first_visit_says_what_the_page_it_opens_will_show(digits_run, monkeypatch):
    """While the default run is prepared, Start describes its own contents; another page (opened first on a fresh
    server) says only that it opens next, not Start's text. The frame hands the page's title down."""
    from studio import sidebar

    start = sidebar.preparing_message("cnn28 on fashion-mnist", "Start")
    assert start.startswith("Preparing the default run (cnn28 on fashion-mnist);") and "scorecard" in start
    other = sidebar.preparing_message("cnn28 on fashion-mnist", "Training objectives")
    assert other.endswith("Then the Training objectives page opens on it.") and "scorecard" not in other

    seen = []
    real = sidebar.sidebar_run_picker

    def spy(*args, **kwargs):
        seen.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(sidebar, "sidebar_run_picker", spy)
    at = app(OBJECTIVES_PAGE, TIMEOUT)
    at.session_state["run_id"] = digits_run.run_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert seen and seen[-1][0] == ("Training objectives",)
