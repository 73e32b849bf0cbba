"""The training-objectives page in AppTest (app_pages/Objectives.py, through app.py): it opens on the current run's
data set, and its estimate is scaled to this machine as the training would find it (issue 43)."""

from __future__ import annotations

import pytest

from studio import session

pytestmark = pytest.mark.slow


def _dataset(at) -> str:
    return next(box for box in at.selectbox if box.key == session.OBJ_DATASET).value


def test_the_page_opens_on_the_current_runs_data_set_and_says_the_machine(digits_run, pages, monkeypatch) -> None:
    from relu_core.studies import objectives

    monkeypatch.setenv("RELU_STUDIO_MODEL_THREADS", "1")
    # none cached: with every model cached (by other tests of the session) the sentence says "No training" instead
    monkeypatch.setattr(objectives, "cached_objectives", lambda *args, **kwargs: ())
    at = pages.open("Objectives.py", digits_run)
    pages.ok(at)
    assert _dataset(at) == "digits"  # it opened on Fashion-MNIST with another data set's run current
    hint = " ".join(info.value for info in at.info)
    assert "Press **Run the study**" in hint and "scaled to this machine now: 1 model thread, load" in hint
    # a data set chosen here stays chosen while the current run stays (any other offered one: Fashion-MNIST where
    # ../shared/data or Debian's package is present)
    box = next(box for box in at.selectbox if box.key == session.OBJ_DATASET)
    others = [name for name in box.options if name != "digits"]
    if not others:
        pytest.skip("no data set but digits is offered here")
    box.set_value(others[0])
    at.run()
    pages.ok(at)
    assert _dataset(at) == others[0]
    at.run()
    assert _dataset(at) == others[0]
