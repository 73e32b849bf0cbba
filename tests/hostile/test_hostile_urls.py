"""URL parameters a shared link (or an attacker) puts in front of Explore: every value goes through one validator
(``studio.query.parse_param``); a malformed or out-of-range value keeps the control's default and is named in a
notice, a grid value goes to the control's nearest choice and says so, and nothing crashes the page."""

from __future__ import annotations

import pytest
from apptest_pages import EXPLORE, app

from studio import query


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("seed", "4", 4),
        ("seed", "0", 0),
        ("tune", "0.51", 0.5),
        ("tune", "0.3", 0.33),
        ("tune", "0.05", 0.1),
        ("T", "2", 2.0),
        ("T", "1000", 1000.0),
        ("lam", "0.3", 0.3),
        ("lam", "auto", "auto"),
        ("eps", "0.0012", 0.0012),
    ],
)
def test_good_and_grid_values(name, text, expected):
    value = query.parse_param(name, text)
    assert value == expected if isinstance(expected, str) else value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("seed", "²"),  # "²".isdigit() is True, int("²") fails: it crashed the page
        ("seed", "9" * 5000),
        ("seed", "-1"),
        ("seed", "10001"),
        ("seed", "1.5"),
        ("tune", "0.96"),
        ("tune", "nan"),
        ("T", "1e308"),
        ("T", "0"),
        ("lam", "1.5"),
        ("lam", "[x](http://example.com)"),
        ("eps", "-0.001"),
    ],
)
def test_bad_values_are_refused(name, text):
    with pytest.raises(ValueError):
        query.parse_param(name, text)


@pytest.mark.slow
def test_a_bad_link_keeps_the_defaults_names_each_parameter_and_carries_no_markdown():
    at = app(EXPLORE, 300)
    at.query_params.update({"seed": "²", "tune": "0.51", "lam": "[log in](http://evil.example)", "T": "2"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="ex_seed").value == 0  # the default
    assert at.select_slider(key="ex_tune_fraction").value == 0.5  # nearest preset, not the first one
    assert at.slider(key="ex_lam").value == 0.5
    assert at.select_slider(key="ex_temperature").value == 2.0
    notice = next(w.value for w in at.warning if w.value.startswith("This link's settings"))
    assert "seed=? is not a whole number" in notice and "tune=0.51" in notice and "lam=" in notice
    assert not any(mark in notice for mark in ("[", "](", "://"))  # the link cannot be Markdown there
