"""Values that passed a check and failed later in words nobody could act on (issue 37, #9): a seed of 2^70
passed the validators, then torch said "Overflow when unpacking long long"; NUL and ESC from a shared link's
run name reached the notice on every page (``studio.text.plain`` kept control characters). Every integer is now
bounded where it is read (``validation.MAX_INTEGER``, 2^63 − 1), and control characters are shown as visible
stand-ins (␀, ␛, �)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from relu_core import cli, explore, validation
from relu_core.errors import InputError
from studio import text as text_module

HUGE_SEED = 2**70


def test_a_seed_beyond_64_bits_is_refused_in_one_line(capsys):
    argv = ["train", "--dataset", "digits", "--model", "cnn8", "--epochs", "1", "--seed", str(HUGE_SEED)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--seed must be at most 9,223,372,036,854,775,807" in lines[0], err
    assert "Overflow" not in err and str(HUGE_SEED) in lines[0]


def test_the_library_refuses_the_seed_too():
    with pytest.raises(InputError, match=r"the split seed must be at most 9,223,372,036,854,775,807"):
        explore.Setting(seed=HUGE_SEED)
    assert validation.integer(validation.MAX_INTEGER, "seed", minimum=0) == 2**63 - 1
    assert validation.parse_int("12", "--seeds", minimum=1) == 12  # small values as before


def test_plain_shows_control_characters_visibly():
    shown = text_module.plain("run\x00name\x1b[2J\x07\x7f\u202eevil")
    assert shown == "run␀name␛\\[2J␇␡\ufffdevil"
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)


def _link_notice() -> None:
    from studio import query

    query.open_run_from_query()
    query.query_run_notice()


def test_a_links_run_name_with_nul_and_esc_shows_them_visibly():
    at = AppTest.from_function(_link_notice, default_timeout=60)
    at.query_params.update({"run": "0123456789abcdef", "run_name": "cats\x00\x1b]0;owned\x07 \x1b[31mred"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (notice,) = [w.value for w in at.warning]
    assert "cats␀␛\\]0;owned␇ ␛\\[31mred" in notice, repr(notice)
    assert not any(ord(c) < 0x20 for c in notice), repr(notice)
