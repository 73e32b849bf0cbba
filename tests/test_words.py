"""Words on screen (issue 43): "an airplane", not "A airplane"; "1 such error"."""

from __future__ import annotations

import pytest

from studio.text import with_article


@pytest.mark.parametrize(
    ("noun", "said"),
    [
        ("airplane", "an airplane"),  # CIFAR-10
        ("automobile", "an automobile"),
        ("cat", "a cat"),
        ("Ankle boot", "an Ankle boot"),  # Fashion-MNIST
        ("T-shirt/top", "a T-shirt/top"),
        ("8", "an 8"),  # digits
        ("0", "a 0"),
        ("11", "an 11"),
        ("180", "a 180"),
        ("umbrella", "an umbrella"),  # CIFAR-100
        ("unicycle", "a unicycle"),
        ("hour", "an hour"),
        ("orange", "an orange"),
    ],
)
def test_with_article(noun, said):
    assert with_article(noun) == said
