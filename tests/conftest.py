"""Shared fixtures: real data from ../shared/data, an isolated cache directory per test session, a small real
run (``digits_run``), AppTest of a page (``pages``), the app served (``app_url``) and Debian's Chromium
(``chromium``) for the browser tests."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from studio import headless
from studio.headless import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parent.parent
# One spelling of the path for the code under test and the assertions (../shared may be a symlink).
SHARED_DATA = Path(os.environ.get("RELU_STUDIO_DATA") or REPO.parent / "shared" / "data").resolve()
os.environ["RELU_STUDIO_DATA"] = str(SHARED_DATA)
# The app's default run is Fashion-MNIST (a 40 s training) where it is found; tests use digits (a second) unless
# a test asks for the real default (tests/test_runs.py, marked slow).
os.environ.setdefault("RELU_STUDIO_DEFAULT", "digits")


def _weights_seed() -> int:
    """The default run's training seed for this test session: taken from the checked-out commit, so every commit's
    suite meets other trained weights (as another CPU's kernels would give), while a rerun of one commit meets the
    same ones. No test may rest on one training's weights (a cell's size, an error count, a curve that moves);
    this keeps that true from commit to commit. ``RELU_STUDIO_DEFAULT_SEED=N`` reproduces a session's weights."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
        return int(head[:8], 16) % 1000
    except (OSError, subprocess.SubprocessError, ValueError):  # no git, or not a checkout: the app's own seed
        return 0


os.environ.setdefault("RELU_STUDIO_DEFAULT_SEED", str(_weights_seed()))


def pytest_report_header() -> str:
    return (
        f"default run trained with seed {os.environ['RELU_STUDIO_DEFAULT_SEED']} "
        "(set RELU_STUDIO_DEFAULT_SEED to reproduce it; ATEN_CPU_CAPABILITY=avx2|default for another CPU's kernels)"
    )


# Model work on one torch thread, in this process and the servers and commands it starts: a training's float
# rounding then never depends on how busy the machine is (relu_core.threads.model_work follows the load), and
# one thread holds its speed on a shared machine. tests/test_threads.py checks the load-following policy itself.
os.environ.setdefault("RELU_STUDIO_MODEL_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session writes its caches to a fresh temporary directory, never to data_cache/."""
    path = tmp_path_factory.mktemp("relu_cache")
    os.environ["RELU_STUDIO_CACHE"] = str(path)
    return path


@pytest.fixture(scope="session", autouse=True)
def _no_job_outlives_the_session():
    """Background jobs a test left running (the Start page's scorecard starts some) are cancelled and waited for
    before the interpreter exits: a daemon thread still inside torch at exit aborts the process (exit code 134)."""
    yield
    from relu_core import jobs

    running = [job for job in jobs.MANAGER.jobs() if job.running]
    for job in running:
        job.cancel()
    for job in running:
        job.wait(300)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that read ../shared/data carry the ``real_data`` marker (``-m "not real_data"`` skips them)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_data)
    _skip_browser_tests(items)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets and weights in ../shared/data (skips the test where they are absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


# ------------------------------------------------------------------------------------------ a small real run


@pytest.fixture(scope="session")
def digits_run():
    """scikit-learn digits with a linear classifier (logistic regression, about 96 % accurate) as a torch model.

    A stand-in for the app's default run that needs neither the shared data nor the CNN training time. The
    run is frozen and its model is only evaluated, so one instance serves the whole session.
    """
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression
    from torch import nn

    from relu_core import datasets, engine
    from relu_core.runs import Run

    train = datasets.load_dataset("digits", split="train")
    test = datasets.load_dataset("digits", split="test")
    flat = (train.images.reshape(len(train.images), -1) / 255.0 - 0.5) / 0.5  # the engine's normalisation
    fit = LogisticRegression(C=0.05, max_iter=300).fit(flat, train.labels)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, len(train.class_names)))
    with torch.no_grad():
        model[1].weight.copy_(torch.from_numpy(fit.coef_))
        model[1].bias.copy_(torch.from_numpy(fit.intercept_))
    model.eval()
    logits = engine.compute_logits(model, test.images, mean=(0.5,), std=(0.5,), device="cpu")
    assert np.mean(logits.argmax(1) == test.labels) > 0.9  # the stand-in is a sensible classifier
    return Run(
        run_id="tiny-digits-linear",
        logits=logits,
        labels=test.labels,
        class_names=tuple(test.class_names),
        images=test.images,
        model=model,
        model_name="linear",
        mean=(0.5,),
        std=(0.5,),
        dataset_name="digits",
        source="linear classifier on digits (test fixture)",
    )


# ------------------------------------------------------------------------------- AppTest of a dashboard page


class Pages:
    """Opens a page of the dashboard in AppTest on a given run, and checks a page for exceptions and errors."""

    timeout = 120

    @staticmethod
    def open(page: str, run, **state):
        """``page`` (a file under app_pages/, opened through app.py) on ``run`` (registered in the process-wide
        run registry the sidebar reads), with ``state`` put in the session state before the first run; returns
        the AppTest, run once."""
        from apptest_pages import app

        from relu_core import runs

        runs.register_run(run)
        at = app(f"app_pages/{page}", Pages.timeout)
        at.session_state["run_id"] = run.run_id
        for key, value in state.items():
            at.session_state[key] = value
        return at.run()

    @staticmethod
    def no_exceptions(at) -> None:
        assert not at.exception, [e.value for e in at.exception]

    @staticmethod
    def ok(at) -> None:
        """No exception and no error box on the page."""
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]


@pytest.fixture
def pages() -> Pages:
    return Pages()


# -------------------------------------------------------------------------- the app served, in real Chromium


def _skip_browser_tests(items: list[pytest.Item]) -> None:
    """Tests marked ``browser`` skip where Debian's Chromium or playwright is missing."""
    if not CHROMIUM.exists():
        reason = "Debian chromium (/usr/bin/chromium) is not installed"
    elif importlib.util.find_spec("playwright") is None:
        reason = "playwright is not installed"
    else:
        return
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """``streamlit run app.py`` headless on a free port (one server per test module, ``studio.headless``); the
    cache is this test session's temporary one. The default run is trained here first, into that cache, so that
    no page wait depends on training speed (on a busy machine the digits CNN took minutes, not a second)."""
    from relu_core import runs

    env = {
        **os.environ,
        "RELU_STUDIO_CACHE": os.environ.get("RELU_STUDIO_CACHE") or str(tmp_path_factory.mktemp("browser_cache")),
    }
    runs.default_run()  # cached by content: the server reads the same weights and logits
    with (tmp_path_factory.mktemp("streamlit") / "server.log").open("w") as log:
        try:
            server, url = headless.serve(env, log)
        except RuntimeError:
            pytest.fail(f"streamlit did not start: see {log.name}")
        try:
            yield url
        finally:
            headless.stop(server)


@pytest.fixture
def chromium():
    """Debian's Chromium, headless, launched through playwright for one test (closed after it); open a session
    with ``chromium.new_context(viewport=...).new_page()``."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
