"""The limits of the browser tests' and AppTest's waits (studio.headless.slowdown, wait_ms, wait_s): a quiet
machine's limit scaled by how slow the machine is now, within a ceiling (issue 43: a fresh clone's suite timed out
after 150 s waiting for figures that took 11-15 s by hand, at a load of 5-12 on 2 cores)."""

from __future__ import annotations

import pytest

from studio import headless


@pytest.fixture(autouse=True)
def _fresh_reading(monkeypatch):
    monkeypatch.setattr(headless, "_reading", None)
    monkeypatch.setattr(headless.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


def _machine(monkeypatch, load: float, core_share: float) -> None:
    monkeypatch.setattr(headless.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(headless, "_spin_ratio", lambda spin_s: 1.0 / core_share)
    monkeypatch.setattr(headless, "_reading", None)


def test_a_quiet_machine_keeps_the_limits(monkeypatch) -> None:
    _machine(monkeypatch, load=0.5, core_share=1.0)
    assert headless.slowdown() == 1.0
    assert headless.wait_ms(10_000) == 10_000 and headless.wait_s(60) == 60


def test_the_load_per_cpu_or_the_share_of_a_core_scales_the_limits(monkeypatch) -> None:
    _machine(monkeypatch, load=10.0, core_share=1.0)
    assert headless.slowdown() == 5.0 and headless.wait_ms(150_000) == 750_000
    _machine(monkeypatch, load=0.0, core_share=1 / 3)  # this thread got a third of a core
    assert headless.slowdown() == pytest.approx(3.0)
    _machine(monkeypatch, load=100.0, core_share=1.0)
    assert headless.slowdown() == headless.MAX_SLOWDOWN  # a ceiling still


def test_a_reading_lasts_a_while(monkeypatch) -> None:
    _machine(monkeypatch, load=10.0, core_share=1.0)
    assert headless.slowdown(now=100.0) == 5.0
    monkeypatch.setattr(headless.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert headless.slowdown(now=100.0 + headless.READING_S / 2) == 5.0
    assert headless.slowdown(now=100.0 + headless.READING_S + 1) == 1.0


def test_the_spin_reads_at_least_one() -> None:
    assert headless._spin_ratio(0.02) >= 0.9  # wall time is never much below the CPU time of one thread
