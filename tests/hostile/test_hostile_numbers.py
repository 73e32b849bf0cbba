"""Hostile input, round five: numbers at the edge. A tiny r* never hangs the guarantee (the fewest samples that
can certify it in closed form, an r* no sample size can certify refused in one line wherever r* enters), a tiny
run's guarantee is strict JSON, a huge epoch count allocates nothing per step and is refused in one line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from relu_core import cli, risk_control
from relu_core.errors import InputError

REPO = Path(__file__).resolve().parents[2]
#: Each case in a child process under this limit: the old loop never returned.
HANG_S = 60


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _logits(path: Path, n: int, seed: int = 0, signal: float = 2.0) -> Path:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3)) + signal * np.eye(3)[labels]
    np.savez(path, logits=logits.astype(np.float32), labels=labels)
    return path


def _first_passing(risk: float, delta: float) -> int:
    """The fewest accepted samples, none wrong, whose exact binomial p-value is at most δ, by scipy."""
    n = math.ceil(math.log(delta) / math.log1p(-risk))
    while n > 1 and scipy_stats.binom.cdf(0, n - 1, risk) <= delta:
        n -= 1
    while scipy_stats.binom.cdf(0, n, risk) > delta:
        n += 1
    return n


@pytest.mark.parametrize("risk", [1e-12, 1e-9, 1e-6, 0.001, 0.02, 0.1, 0.3])
@pytest.mark.parametrize("delta", [0.01, 0.1, 0.5])
def test_the_fewest_certifying_samples_is_the_binomial_tests_own(risk, delta):
    assert risk_control.min_accepted(risk, delta) == _first_passing(risk, delta)


def test_the_fewest_certifying_samples_agree_with_the_error_table():
    for risk, delta in ((0.02, 0.1), (0.05, 0.05), (0.1, 0.2)):
        n_min = int(risk_control.min_accepted(risk, delta))
        table = risk_control.max_errors(n_min + 5, risk, delta)
        assert table[n_min] == 0 and table[n_min - 1] == -1


def _in_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=HANG_S, check=False
    )


TINY_RISKS = ["1e-12", "1e-16", "1e-300", "5e-324"]


@pytest.fixture(scope="module")
def library_answers() -> dict[str, list[str]]:
    """Every tiny r*'s three calls, in one child process under :data:`HANG_S` (one import of the library, not one
    per r*): each r*'s three printed lines, by r*."""
    code = (
        "import numpy as np, relu_core as rc\n"
        "from relu_core import risk_control\n"
        "from relu_core.errors import InputError\n"
        "u = np.linspace(0, 1, 200); c = np.ones(200, bool)\n"
        f"for r in ({', '.join(TINY_RISKS)}):\n"
        "    print('risk:', repr(r))\n"
        "    for call in (lambda: rc.guaranteed_risk(u, c, r, 0.1), lambda: risk_control.start_threshold(u, 100, r,"
        " 0.1), lambda: risk_control.min_accepted(r, 0.1)):\n"
        "        try:\n"
        "            out = call()\n"
        "        except InputError as e:\n"
        "            print('refused:', e)\n"
        "        else:\n"
        "            print('value:', getattr(out, 'refusal', out))\n"
    )
    done = _in_child(code)
    assert done.returncode == 0, done.stderr
    answers: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("risk: "):
            answers[line.removeprefix("risk: ")] = lines = []
        else:
            lines.append(line)
    return answers


@pytest.mark.slow  # a child process (one for every r*)
@pytest.mark.parametrize("risk", TINY_RISKS)
def test_a_tiny_risk_returns_from_the_library(risk, library_answers):
    lines = library_answers[repr(float(risk))]
    assert len(lines) == 3
    if float(risk) >= 1e-12:  # certifiable by some sample size: the split is too small
        assert "too few calibration samples" in lines[0] and "2,302,585,092,993" in lines[0]
    else:
        assert all(line.startswith("refused: ") and "no sample size" in line for line in lines[:2]), lines


@pytest.mark.parametrize("risk", [1e-16, 1e-300, 5e-324])
def test_an_uncertifiable_risk_is_refused_in_one_line(risk):
    with pytest.raises(InputError, match="no sample size") as caught:
        risk_control.check_certifiable(risk, 0.1)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="no sample size"):
        rc_view_setting(risk)


def rc_view_setting(risk: float):
    from relu_core import explore

    return explore.Setting(op_kind="risk", op_target=risk, op_delta=0.1)


def test_the_pages_choices_are_all_certifiable():
    from relu_core import explore

    for risk in explore.RISKS:
        for delta in explore.DELTAS:
            assert risk_control.check_certifiable(risk, delta) == (risk, delta)


CLI_CASES = [("evaluate", "1e-12"), ("evaluate", "5e-324"), ("export", "1e-12"), ("export", "1e-300")]


@pytest.fixture(scope="module")
def cli_answers(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Each case of :data:`CLI_CASES` through the command line's ``main`` (what ``python -m relu_core`` exits
    with), all in one child process under :data:`HANG_S` rather than one interpreter each: by case, the exit
    status and what it wrote to stdout and stderr (an escaped exception's traceback included)."""
    folder = tmp_path_factory.mktemp("tiny_risk_cli")
    logits = _logits(folder / "run.npz", 400)
    argvs = []
    for command, risk in CLI_CASES:
        argv = [command, "--logits", str(logits), "--risk", risk]
        argv += (
            ["--out", str(folder / f"d-{risk}.pt2")] if command == "export" else ["--seeds", "1", "--bootstrap", "0"]
        )
        argvs.append(argv)
    code = (
        "import contextlib, io, json, sys, traceback\n"
        "from relu_core.cli import main\n"
        "answers = []\n"
        f"for argv in {argvs!r}:\n"
        "    out, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "        try:\n"
        "            status = main(argv)\n"
        "        except SystemExit as exc:\n"
        "            status = exc.code\n"
        "        except BaseException:\n"
        "            traceback.print_exc()\n"
        "            status = 1\n"
        "    answers.append({'returncode': status, 'stdout': out.getvalue(), 'stderr': err.getvalue()})\n"
        "sys.__stdout__.write(json.dumps(answers))\n"
    )
    done = _in_child(code)
    assert done.returncode == 0, done.stderr
    return dict(zip(CLI_CASES, json.loads(done.stdout.splitlines()[-1])))


@pytest.mark.slow  # a child process (one for every case)
@pytest.mark.parametrize("command, risk", CLI_CASES)
def test_the_cli_never_hangs_on_a_tiny_risk(command, risk, cli_answers):
    done = cli_answers[command, risk]
    assert "Traceback" not in done["stderr"]
    if float(risk) < 1e-12:
        assert done["returncode"] == 2
        assert "no sample size" in _one_error_line(done["stderr"])
    elif command == "evaluate":
        assert done["returncode"] == 0 and "too few calibration samples" in done["stdout"]
    else:
        assert done["returncode"] == 2 and "too few calibration samples" in _one_error_line(done["stderr"])


def test_a_url_asking_an_uncertifiable_risk_is_refused():
    from studio import query

    with pytest.raises(ValueError, match="no sample size"):
        query.parse_param("risk", "1e-300")


# ------------------------------------------------------------------------------------------- a tiny run's JSON
def test_a_guarantee_on_a_tiny_run_is_strict_json(tmp_path, capsys):
    logits = _logits(tmp_path / "tiny.npz", 8, signal=0.0)  # 4 of 8 right
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in divide" is a defect here
        status = cli.main(["evaluate", "--logits", str(logits), "--risk", "0.3", "--json", "--seeds", "2"])
    out = capsys.readouterr().out
    assert status == 0
    assert "NaN" not in out and "Infinity" not in out
    json.loads(out, parse_constant=lambda name: pytest.fail(f"bare {name} in --json"))
