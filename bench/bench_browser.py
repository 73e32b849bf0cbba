"""Browser slider latency: keypress to page settled, in Debian's Chromium through Playwright.

Serves the app headless on 127.0.0.1 (a temporary cache holding synthetic runs of N x C logits, opened through
the shared-URL ``run`` parameter), focuses the λ slider (or the T slider) on Explore, presses an arrow key and
times two moments: **shown**, the first frame from which the page's content (the D* heatmap, the ROC and the
risk-coverage figures, the HTML tables and texts) equals its content once settled and stays so; **settled**,
when those figures hold new data, no element is marked stale and the script is not running (the server's rerun
is over). A λ move the browser draws from the neighbours' views the server sent (``studio.live_chart.Follow``)
is shown before the server has heard of it; the rerun it starts must then change nothing on screen (a press
whose content changed after settling is counted as a mismatch). Prints median and max per slider and size; ``--sessions 4`` drives 4 browser sessions moving λ at once
on the first size and prints median and p95 over all their key presses. Same Chromium launch recipe as
tests/test_browser.py (/usr/bin/chromium, never ``playwright install``). By default the presses alternate left
and right (two settings, reused from the session's caches after the first visit); ``--one-way`` asks for a new
setting on every press, as a user dragging the slider does.

This machine's speed drifts by tens of percent within an hour, so a change is judged with ``--against DIR``:
a second server runs the app of another checkout (e.g. ``git worktree add /tmp/before HEAD~1``), each with its
own browser, and the λ presses alternate between the two, so both see the same moments of the machine.

    .venv/bin/python bench/bench_browser.py [--sizes 10000x10,10000x100] [--repeats 10] [--sessions 4] [--one-way]
        [--sizes 50000x1000]   # ImageNet-like logits; λ only, timed once the λ grid is ready (its neighbours on)
        [--profile]   # also: the renderer's CPU time per λ press (plotly.js, Streamlit and React, native)
        [--against DIR]   # instead: λ presses alternating between this checkout and the one in DIR
        [--double]   # each timed press is two arrow presses in a row (the second before the server answers)
        [--busy]   # a spinning process on every core while measuring (bench/busy.py)

Every figure is printed with the machine's load (the 1-minute load average at its start and its end), and each λ
press is classed: drawn before the server's answer (the first payload whose view is of the λ the press reached),
or why not: no view of that λ on the page, following paused, or drawn late.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.busy import one_core_busy  # noqa: E402
from studio import headless  # noqa: E402
from studio.headless import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

SLIDERS = {"λ": "weight of the errors", "T": "softmax temperature"}

# The data the λ / T sliders change: D* (title and z), the ROC and the risk-coverage curves (the confusion matrix,
# p[1], does not depend on them; the stale check covers it).
_SNAPSHOT = """() => { const p = [...document.querySelectorAll('.js-plotly-plot')];
    if (p.length < 4 || !p[0].data || !p[2].data || !p[3].data) return null;
    return JSON.stringify([p[0].layout.title.text, p[0].data.map(t => t.z), p[2].data.map(t => [t.x, t.y]),
                           p[3].data.map(t => [t.x, t.y])]); }"""
# The HTML elements' markup (tables, texts), compared on every frame as one string (small).
_HTML = "[...document.querySelectorAll('.relu-studio-html')].map(e => e.innerHTML).join('|')"
# The page's content: [without the paired intervals, with them]. The intervals come from a background bootstrap
# (the paired table, and the metrics table's colours): "shown" times the rest, "intervals" everything.
_CONTENT = (
    """() => { const figures = (("""
    + _SNAPSHOT
    + """)() || ""); let main = figures, full = figures;
    for (const e of document.querySelectorAll('.relu-studio-html')) {
      full += '|' + e.innerHTML;
      if (!e.closest('.st-key-ex_chart_paired, .st-key-ex_chart_operating_points'))
        main += '|' + e.innerHTML.replace(/ class="(better|worse)"/g, '');
    }
    return [main, full]; }"""
)
# Records, on every animation frame from the key press on, each change of the content (a chart holding other data
# objects, or other HTML) with its time.
_RECORD = (
    """() => { const rec = { changes: [], start: null, last: null, answer: null, moved: null }; window.__benchRec = rec;
    const lamValue = () => { const l = document.querySelector('.st-key-ex_lam [data-testid="stSliderThumbValue"]');
      return l ? Number(l.textContent).toFixed(2) : null; };
    let sent = null, value = null;
    document.addEventListener("keydown", () => { rec.start = performance.now(); sent = true; value = lamValue(); },
      { capture: true, once: true });
    const frame = () => {
      if (window.__benchRec !== rec || rec.stopped) return;
      if (sent && rec.answer === null) {  // the server's answer to the press: a view of the λ the press reached
        const r = window.__reluStudioFollow, v = lamValue();
        if (r && v !== value && [...r.targets].some(t => t.follow && t.follow.current === v)) rec.answer = performance.now();
      }
      if (sent && rec.moved === null && lamValue() !== value) {  // the slider's first frame at its new value
        const r = window.__reluStudioFollow, v = lamValue();
        const targets = r ? [...r.targets].filter(t => t.follow) : [];
        rec.moved = { blocked: !!r && r.blockedAt !== null, following: targets.length,
                      withView: targets.filter(t => t.follow.views[v]).length,
                      answered: rec.answer !== null };
      }
      const p = [...document.querySelectorAll('.js-plotly-plot')];
      const held = p.length >= 4 ? [p[0].layout, p[0].data, p[2].data, p[3].data] : [];
      const html = ("""
    + _HTML
    + """);
      const last = rec.last;
      if (!last || html !== last.html || held.length !== last.held.length || held.some((r, i) => r !== last.held[i])) {
        rec.last = { html, held };
        rec.changes.push([performance.now(), ("""
    + _CONTENT
    + """)()]);
      }
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame); }"""
)
# After settling: ms from the key press to the final content shown without / with the intervals (the first change
# from which it stays final), to settled, and whether the final content had been shown, then left, before.
_RESULT = (
    """() => { const rec = window.__benchRec; rec.stopped = true; const final = ("""
    + _CONTENT
    + """)();
    const since = (k) => { let j = rec.changes.length;
      while (j > 0 && rec.changes[j - 1][1][k] === final[k]) j -= 1;
      return [j < rec.changes.length ? rec.changes[j][0] : window.__benchSettledAt,
              rec.changes.slice(0, j).some(([, content]) => content[k] === final[k])]; };
    const [shown, flipped] = since(0), [intervals] = since(1);
    return [shown - rec.start, intervals - rec.start, window.__benchSettledAt - rec.start, flipped,
            rec.answer === null ? null : rec.answer - rec.start, rec.moved]; }"""
)
# Settled: no element stale, the script not running, and the snapshot differs from the one before the key press.
# It runs on every animation frame, and stringifying the figures' data costs milliseconds of the renderer's main
# thread at 10k x 100 (the thread that is drawing the update): it is stringified only when a chart holds data
# objects it did not hold at the last check (Plotly swaps them whenever a chart is redrawn).
_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""
_SETTLED = (
    """(before) => { const p = [...document.querySelectorAll('.js-plotly-plot')];
    if (p.length < 4 || !p[0].data || !p[2].data || !p[3].data) return false;
    if (document.querySelector('[data-stale="true"]')
        || document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]'))
        return false;
    const held = [p[0].layout, p[0].data, p[2].data, p[3].data], seen = window.__benchSeen;
    if (seen && held.every((ref, i) => ref === seen[i])) return false;
    window.__benchSeen = held;
    if (("""
    + _SNAPSHOT
    + """)() === before) return false;
    window.__benchSettledAt = performance.now();
    return true; }"""
)


def _large(n: int, c: int) -> bool:
    """Whether a run is large enough that λ's neighbours wait for its λ grid (``explore.cached.GRID_MIN_WORK``)."""
    from relu_core.explore import cached

    return n * c * c > cached.GRID_MIN_WORK


def _synthetic_run(n: int, c: int, seed: int = 0):
    """Logits of n samples x c classes: ImageNet-like (``bench_scale.imagenet_like_run``) for a large run, else
    a class raise on random noise."""
    from relu_core import runs

    if _large(n, c):
        from bench.bench_scale import imagenet_like_run

        return imagenet_like_run(n, c, seed)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = (rng.normal(size=(n, c)) + 4.0 * np.eye(c)[labels] * rng.random((n, 1))).astype(np.float32)
    names = tuple(f"class {k}" for k in range(c))
    return runs.Run.from_logits(
        logits,
        labels,
        names,
        source=f"synthetic {n} x {c}",
    )


def _serve(cache: str, checkout: Path = REPO):
    """The app of ``checkout`` on a free port with ``cache`` as its cache (``studio.headless``);
    ``(process, url)``."""
    env = {**os.environ, "RELU_STUDIO_CACHE": cache, "RELU_STUDIO_DEFAULT": "digits"}
    try:
        return headless.serve(env, checkout=checkout)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def _compare(pw, tmp: str, sizes, run_ids, url: str, other: Path, repeats: int) -> None:
    """Median / max of λ presses alternating between the app at ``url`` and ``other``'s, per size."""
    other_server, other_url = _serve(tmp, other)
    try:
        for (n, c), run_id in zip(sizes, run_ids, strict=True):
            opened = [
                _open(pw, u, run_id, str(Path(tmp) / f"compare-{n}-{c}-{i}")) for i, u in enumerate((url, other_url))
            ]
            times: list[list[tuple[float, float, float]]] = [[], []]
            classed: list[list[str]] = [[], []]
            start_load = os.getloadavg()[0]
            try:
                for k in range(repeats):
                    for (_, page), out, kinds in zip(opened, times, classed, strict=True):
                        out.append(_press_and_time(page, "λ", _key("λ", k, False)))
                        kinds.append(FOLLOWING[-1])
            finally:
                for context, _ in opened:
                    context.close()
            for name, out, kinds in zip(("this checkout", str(other)), times, classed, strict=True):
                print(f"{n:>7,} x {c:<4} λ, {name}: {_figures(out)}; {_following_line(kinds)}", flush=True)
            print(f"  {_load(start_load)}", flush=True)
    finally:
        headless.stop(other_server)
        other_server.wait(timeout=10)


#: Key presses per timed press (``--double``: two in a row, the second before the server can answer the first).
PRESSES = 1


def _press_and_time(page, slider: str, key: str) -> tuple[float, float, float]:
    """Seconds from the key press to the final content shown (without, then with the paired intervals), and to
    the page settled with new figures (pressed
    once the page is idle: a rerun still under way, such as the one the paired bootstrap's watch starts when it
    lands, leaves two copies of the slider on the page for a moment). A press whose final content had been on
    screen, then left it, then come back is a mismatch: counted in ``MISMATCHES``."""
    page.wait_for_function(_IDLE, timeout=60_000, polling="raf")
    before = page.evaluate(_SNAPSHOT)
    page.evaluate("window.__benchSeen = null")
    thumb = page.locator('[data-testid="stSlider"]').filter(has_text=SLIDERS[slider]).get_by_role("slider")
    thumb.focus()
    page.evaluate(_RECORD)
    for _ in range(PRESSES):
        page.keyboard.press(key)
    page.wait_for_function(_SETTLED, arg=before, timeout=60_000, polling="raf")
    page.wait_for_timeout(300)  # anything the settled page still changes (it must not) is seen
    shown, intervals, settled, flipped, answer, moved = page.evaluate(_RESULT)
    MISMATCHES.append(bool(flipped))
    if slider == "λ":
        FOLLOWING.append(_followed(shown, settled if answer is None else answer, moved))
    return shown / 1000, intervals / 1000, settled / 1000


#: One entry per press: whether its content left the final one after showing it (a wrong view shown).
MISMATCHES: list[bool] = []
#: One entry per λ press: how the browser drew it (:func:`_followed`).
FOLLOWING: list[str] = []


def _followed(shown: float, answer: float, moved: dict | None) -> str:
    """How a λ press was drawn: "followed" (its content shown before the server's answer, the first payload whose
    view is of the λ the press reached, got to the page), else why not: "no view" (when the slider reached its new value, some element
    following λ held no view of that value: the neighbours were not there), "paused" (following was paused by
    a touch of another control), "late" (the views were there but drawn only after the server's answer)."""
    if shown < answer:
        return "followed"
    if moved is None or moved["following"] == 0 or moved["withView"] < moved["following"]:
        return "no view"
    return "paused" if moved["blocked"] else "late"


def _following_line(presses: list[str]) -> str:
    """The λ presses drawn before the server's answer, and why the others were not."""
    why = {k: presses.count(k) for k in ("no view", "paused", "late") if k in presses}
    return f"drawn before the server's answer: {presses.count('followed')} of {len(presses)}" + (
        " (" + ", ".join(f"{k}: {n}" for k, n in why.items()) + ")" if why else ""
    )


def _figures(times: list[tuple[float, float, float]]) -> str:
    """Median / max of the shown, intervals and settled times, in ms."""
    return "   ".join(
        f"{name} {statistics.median(ms):4.0f} / {max(ms):4.0f}"
        for name, ms in zip(("shown", "intervals", "settled"), ([1000 * t[i] for t in times] for i in range(3)))
    )


def _load(start: float) -> str:
    """The machine's load while a figure was measured: the 1-minute load average at its start and its end."""
    return f"(load {start:.1f} -> {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)"


def _key(slider: str, k: int, one_way: bool) -> str:
    """The k-th arrow key: alternating, or one way (λ down from 0.5, T up from 1: room for 40 presses)."""
    if one_way:
        return "ArrowRight" if slider == "T" else "ArrowLeft"
    return "ArrowLeft" if k % 2 == 0 else "ArrowRight"


def _open(pw, url: str, run_id: str, profile: str):
    context = pw.chromium.launch_persistent_context(
        profile,
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1600, "height": 1400},
    )
    page = context.new_page()
    page.goto(f"{url}/Explore?run={run_id}&lam=0.5&T=1")
    page.wait_for_function(f"({_SNAPSHOT})() !== null", timeout=180_000)
    page.wait_for_timeout(1000)
    return context, page


# Whether the page holds views of λ's neighbours for its live charts (``studio.live_chart.Follow``).
_FOLLOWING = """() => { const r = window.__reluStudioFollow;
    const following = r ? [...r.targets].filter(t => t.follow && t.follow.slider) : [];
    return following.length >= 4 && following.every(t => t.follow.views && Object.keys(t.follow.views).length > 0); }"""


def _wait_for_neighbours(page, limit_s: float = 900.0) -> None:
    """Presses λ, untimed, until the page holds the neighbours' views: on a large run the server sends them once
    the λ grid of its T and split is ready (a background job of about 20-70 s on 2 cores), or at once where its
    views run on a GPU."""
    deadline = time.monotonic() + limit_s
    k = 0
    while not page.evaluate(_FOLLOWING):
        if time.monotonic() > deadline:
            raise SystemExit(f"no neighbours' views after {limit_s:.0f} s of λ presses")
        _press_and_time(page, "λ", _key("λ", k, False))
        k += 1


def _renderer_profile(page, presses: int) -> dict[str, float]:
    """Milliseconds of the page's renderer per λ press, by kind (Chrome's sampling CPU profiler, CDP)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    cdp.send("Profiler.start")
    for k in range(presses):
        _press_and_time(page, "λ", _key("λ", k, False))
    profile = cdp.send("Profiler.stop")["profile"]
    frames = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    spent: dict[str, float] = {}
    for node, micros in zip(profile["samples"], profile["timeDeltas"], strict=True):
        frame = frames[node]
        if frame["functionName"] == "(idle)":
            continue
        kind = (
            "plotly.js"
            if frame["url"].endswith("plotly.min.js")
            else {"(program)": "native (style, layout, paint)", "(garbage collector)": "garbage collection"}.get(
                frame["functionName"], "Streamlit and React"
            )
        )
        spent[kind] = spent.get(kind, 0.0) + micros / 1000 / presses
    return spent


def _session(url: str, run_id: str, repeats: int, out: list[tuple[float, float, float]], profile: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context, page = _open(pw, url, run_id, profile)
        try:
            for k in range(repeats):
                out.append(_press_and_time(page, "λ", _key("λ", k, False)))
        finally:
            context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="10000x10,10000x100", help="comma-separated NxC (default 10000x10,10000x100)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="key presses per slider and size (default 10)")
    parser.add_argument("--sessions", type=int, default=0, help="also N concurrent sessions moving λ (e.g. 4)")
    parser.add_argument(
        "--one-way",
        action="store_true",
        help="press the same arrow every time, so every press asks for a setting not seen before "
        "(default: alternate left / right, which revisits the same two settings)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout of the app: alternate λ presses between it and this one (and print only that)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile the renderer during the λ presses of each size and print where its time went",
    )
    parser.add_argument(
        "--double",
        action="store_true",
        help="each timed press is two presses of the same arrow in a row, the second before the server has "
        "answered the first (alternating: back and forth between two values two steps apart)",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="keep every core busy with a spinning process of its own while measuring (bench/busy.py)",
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as spinners:
        if args.busy:
            for _ in range(os.cpu_count() or 1):
                spinners.enter_context(one_core_busy(limit_s=3600.0))
            print(f"{os.cpu_count()} spinning processes, one a core (--busy)", flush=True)
        _run(args)


def _run(args) -> None:
    global PRESSES
    PRESSES = 2 if args.double else 1
    if not CHROMIUM.exists():
        raise SystemExit("Debian chromium (/usr/bin/chromium) is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from relu_core import runs

    sizes = [tuple(int(v) for v in size.lower().split("x")) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="relu_bench_browser_") as tmp:
        os.environ["RELU_STUDIO_CACHE"] = tmp
        run_ids = []
        for n, c in sizes:
            run = _synthetic_run(n, c)
            runs.remember(run)  # the app reopens it from the URL's run parameter
            run_ids.append(run.run_id)
        server, url = _serve(tmp)
        try:
            if args.against:
                print(
                    f"keypress to shown / intervals / settled, Chromium, {args.repeats} λ presses each, alternating between the apps"
                )
                with sync_playwright() as pw:
                    _compare(pw, tmp, sizes, run_ids, url, args.against.resolve(), args.repeats)
                return
            print(
                f"keypress to shown / intervals / settled, Chromium, {args.repeats} presses each"
                f"{' in one direction' if args.one_way else ', alternating'}"
                f"{', each two presses in a row' if args.double else ''} (median / max, ms)"
            )
            with sync_playwright() as pw:
                for (n, c), run_id in zip(sizes, run_ids, strict=True):
                    context, page = _open(pw, url, run_id, str(Path(tmp) / f"profile-{n}-{c}"))
                    try:
                        if _large(n, c):  # λ only: its neighbours once the grid is ready (a T move is dense)
                            _wait_for_neighbours(page)
                        for slider in ("λ",) if _large(n, c) else SLIDERS:
                            start_load, first = os.getloadavg()[0], len(FOLLOWING)
                            times = [
                                _press_and_time(page, slider, _key(slider, k, args.one_way))
                                for k in range(args.repeats)
                            ]
                            print(f"{n:>7,} x {c:<4} {slider}: {_figures(times)}   {_load(start_load)}", flush=True)
                            if slider == "λ":
                                print(f"{n:>7,} x {c:<4} λ {_following_line(FOLLOWING[first:])}", flush=True)
                        if args.profile:
                            spent = _renderer_profile(page, args.repeats)
                            print(
                                f"{n:>7,} x {c:<4} renderer per λ press: "
                                + ", ".join(f"{kind} {ms:.0f} ms" for kind, ms in sorted(spent.items()))
                            )
                    finally:
                        context.close()
            if args.sessions:
                sessions_load, first = os.getloadavg()[0], len(FOLLOWING)
                results: list[list[tuple[float, float, float]]] = [[] for _ in range(args.sessions)]
                threads = [
                    threading.Thread(
                        target=_session,
                        args=(url, run_ids[0], args.repeats, results[i], str(Path(tmp) / f"session-{i}")),
                    )
                    for i in range(args.sessions)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                presses = [t for r in results for t in r]
                if not presses:
                    raise SystemExit("no session finished a key press")
                n, c = sizes[0]
                print(f"{args.sessions} sessions: {_load(sessions_load)}; λ {_following_line(FOLLOWING[first:])}")
                for name, i in (("shown", 0), ("intervals", 1), ("settled", 2)):
                    times = sorted(t[i] for t in presses)
                    p95 = times[min(len(times) - 1, int(np.ceil(0.95 * len(times))) - 1)]
                    print(
                        f"{args.sessions} sessions moving λ on {n:,} x {c}, {name}: median "
                        f"{1000 * statistics.median(times):.0f} ms, p95 {1000 * p95:.0f} ms ({len(times)} presses)"
                    )
            if any(MISMATCHES):
                print(
                    f"MISMATCH: {sum(MISMATCHES)} of {len(MISMATCHES)} presses left their final content after showing it"
                )
        finally:
            headless.stop(server)
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
