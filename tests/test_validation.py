"""relu_core.validation: the one set of number validators behind the CLI flags and the library's options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relu_core import limits, validation
from relu_core.errors import InputError


def test_integers_refuse_booleans_floats_and_text() -> None:
    assert validation.is_integer(3) and validation.is_integer(np.int64(3)) and validation.is_integer(np.uint8(0))
    for bad in (True, False, np.bool_(True), 3.0, "3", None):
        assert not validation.is_integer(bad), bad
        with pytest.raises(InputError, match=r"^n must be a positive integer, got "):
            validation.integer(bad, "n", minimum=1)


@pytest.mark.parametrize(
    ("value", "minimum", "maximum", "ok"),
    [
        (0, 0, None, True),
        (-1, 0, None, False),
        (1, 1, None, True),
        (0, 1, None, False),
        (2, 2, None, True),
        (1, 2, None, False),
        (5, 1, 5, True),
        (6, 1, 5, False),
        (0, 1, 5, False),
        (-7, None, None, True),
    ],
)
def test_integer_bounds_are_inclusive(value: int, minimum, maximum, ok: bool) -> None:
    if ok:
        result = validation.integer(np.int32(value), "x", minimum=minimum, maximum=maximum)
        assert result == value and type(result) is int
    else:
        with pytest.raises(InputError, match=rf"^x must be .*, got {value}$"):
            validation.integer(value, "x", minimum=minimum, maximum=maximum)


def test_integer_messages_name_the_range_and_the_hint() -> None:
    with pytest.raises(InputError, match=r"^k must be an integer >= 2, got 1$"):
        validation.integer(1, "k", minimum=2)
    with pytest.raises(InputError, match=r"^k must be an integer in \[0, 9\] \(0: none\), got 10$"):
        validation.integer(10, "k", minimum=0, maximum=9, hint=" (0: none)")


def test_fraction_is_open_on_both_ends() -> None:
    assert validation.fraction(0.25, "f") == 0.25 and validation.fraction("0.5", "f") == 0.5
    assert validation.fraction(np.float32(0.75), "f") == pytest.approx(0.75)
    for bad in (0, 1, 0.0, 1.0, -0.1, 1.5, math.nan, math.inf):
        with pytest.raises(InputError, match="^f must lie strictly between 0 and 1"):
            validation.fraction(bad, "f")
    for bad in ("half", None, [0.5]):
        with pytest.raises(InputError, match="^f must be a number strictly between 0 and 1"):
            validation.fraction(bad, "f")


def test_non_negative_accepts_zero_and_refuses_nan() -> None:
    assert validation.non_negative(0, "ε") == 0.0 and validation.non_negative("0.002", "ε") == 0.002
    for bad in (-1e-9, math.nan, math.inf, "x", None):
        with pytest.raises(InputError, match="^ε must be a finite number >= 0"):
            validation.non_negative(bad, "ε")


def test_command_line_parsers_name_the_flag() -> None:
    assert validation.parse_int("7", "--seeds", minimum=1) == 7
    assert validation.parse_int("0", "--bootstrap", minimum=0) == 0
    with pytest.raises(InputError, match=r"^--seeds must be a positive integer, got 'x'$"):
        validation.parse_int("x", "--seeds", minimum=1)
    with pytest.raises(InputError, match=r"^--seeds must be a positive integer, got 0$"):
        validation.parse_int("0", "--seeds", minimum=1)
    with pytest.raises(InputError, match=r"^--seeds must be an integer >= 0, got '1.5'$"):
        validation.parse_int("1.5", "--seeds", minimum=0)
    assert validation.parse_fraction("0.3", "--val-fraction") == 0.3
    with pytest.raises(InputError, match=r"^--coverage must be a number, got 'abc'$"):
        validation.parse_fraction("abc", "--coverage")
    with pytest.raises(InputError, match="^--val-fraction must lie strictly between 0 and 1"):
        validation.parse_fraction("1", "--val-fraction")


@pytest.mark.parametrize(
    "n_bytes, words",
    [
        (0, "0 bytes"),
        (1023, "1,023 bytes"),
        (1024, "1 KiB"),
        (10_000, "9.8 KiB"),
        (1536 << 10, "1.5 MiB"),
        (8 << 30, "8 GiB"),
    ],
)
def test_limits_read_in_binary_units(n_bytes, words):
    assert limits.size_in_words(n_bytes) == words
