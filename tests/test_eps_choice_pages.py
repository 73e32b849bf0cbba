"""The ε grid of the honest selection, chosen on the pages (issue 41, ``studio.eps_choice``): the Studies page's
ladder (``paper-protocol``, ε from rung 3 on) and the Training objectives page offer none / the CPU subset / the
authors' grid on a run with a model, the choice reaches the library call and its job key (another choice is
another result), and a run that cannot be perturbed (logits only, ONNX) says why in one line."""

from __future__ import annotations

import dataclasses

import pytest
from test_studies import synthetic_run

from relu_core import onnx_model, preprocessing, protocol
from studio import eps_choice, session

CPU_GRID = "ε ∈ {0, 0.001, 0.002, 0.004} (a subset of the authors' grid: 4 of its 9 values)"


# ------------------------------------------------------------------------------------------ the widget's parts


def test_the_three_choices_are_the_cli_grids() -> None:
    from relu_core.cli import shared

    assert list(eps_choice.GRIDS) == ["none", "cpu", "authors"] and eps_choice.GRIDS["none"] is None
    assert eps_choice.GRIDS["cpu"] == shared.parse_eps_grid("cpu") == preprocessing.CPU_EPSILONS
    assert eps_choice.GRIDS["authors"] == shared.parse_eps_grid("authors") == protocol.AUTHORS_EPSILONS
    assert session.EPS_GRID_DEFAULT == "none"


def test_the_cost_is_said_in_words_and_a_cpu_is_told_to_use_a_gpu() -> None:
    assert "no image is perturbed" in eps_choice.cost_text(None, gpu=False)
    cpu = eps_choice.cost_text(preprocessing.CPU_EPSILONS, gpu=False)
    assert CPU_GRID in cpu and "one more forward pass" in cpu and "seed × fold × setting" in cpu
    assert "3 here, 8 for the authors' grid" in cpu and "takes hours" in cpu and "use a GPU" in cpu
    authors = eps_choice.cost_text(protocol.AUTHORS_EPSILONS, gpu=True)
    assert "(the authors' grid)" in authors and "8 here" in authors and "computes on a GPU" in authors


def test_why_not_names_logits_only_and_onnx_runs(digits_run) -> None:
    assert eps_choice.why_not(digits_run) is None
    assert "A logits file cannot be perturbed" in eps_choice.why_not(synthetic_run())
    onnx = dataclasses.replace(digits_run, run_id="tiny-digits-onnx", model=None, onnx_file="digits.onnx")
    assert eps_choice.why_not(onnx) == onnx_model.NO_EPS


# ------------------------------------------------------------------------------------------------ the pages


def _recording(monkeypatch, module, name: str) -> list[dict]:
    """Every call of ``module.name`` recorded (its keyword arguments), then made as it was."""
    calls: list[dict] = []
    real = getattr(module, name)

    def record(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, record)
    return calls


def _ladder(pages, run, **state):
    return pages.open(
        "Studies.py",
        run,
        **{session.STUDY_NAME: "paper-protocol", session.STUDY_BOOTSTRAP: 50, session.STUDY_SEEDS: 2, **state},
    )


def _one_line(at, text: str) -> list[str]:
    return [c.value for c in at.caption if text in c.value]


@pytest.mark.slow
def test_the_ladder_offers_the_grid_on_a_model_run_and_runs_the_chosen_one(pages, digits_run, monkeypatch) -> None:
    from relu_core.studies import ladder

    calls = _recording(monkeypatch, ladder, "run_study")
    at = _ladder(pages, digits_run)
    pages.ok(at)
    radio = at.radio(key=session.STUDY_EPS_GRID)
    assert radio.label == "ε searched from rung 3 on" and radio.value == "none"
    assert radio.options == [eps_choice.LABELS[name] for name in eps_choice.GRIDS]
    assert _one_line(at, "no image is perturbed")
    radio.set_value("cpu").run()
    pages.ok(at)
    assert _one_line(at, CPU_GRID) and _one_line(at, "one more forward pass")
    at.button(key=session.run_button_key(session.STUDIES_PAGE)).click().run()
    pages.ok(at)
    assert [call.get("epsilons") for call in calls] == [preprocessing.CPU_EPSILONS]
    assert _one_line(at, f"Note: ε searched from rung 3 on: {CPU_GRID}")
    table = next(df.value for df in at.dataframe if "what it changed" in df.value.columns)
    assert "ε over 0, 0.001, 0.002, 0.004" in table["what it changed"].iloc[2]
    # the choice is part of the job's key: ε = 0 is another result, asked for, not the ε one shown as its
    at.radio(key=session.STUDY_EPS_GRID).set_value("none").run()
    pages.ok(at)
    assert any("The settings changed since" in i.value for i in at.info)
    assert len(calls) == 1


@pytest.mark.slow
def test_a_logits_run_says_in_one_line_why_eps_cannot_be_searched(pages, monkeypatch) -> None:
    from relu_core.studies import ladder

    calls = _recording(monkeypatch, ladder, "run_study")
    # the authors' grid kept from a model run: a logits run neither offers it nor passes it on
    at = _ladder(pages, synthetic_run(), **{session.STUDY_EPS_GRID: "authors"})
    pages.ok(at)
    assert not [r for r in at.radio if r.key == session.STUDY_EPS_GRID]
    lines = _one_line(at, "ε searched from rung 3 on")
    assert lines == [
        "ε searched from rung 3 on: none (ε = 0). A logits file cannot be perturbed (ε needs the run's "
        "model and its images)."
    ]
    at.button(key=session.run_button_key(session.STUDIES_PAGE)).click().run()
    pages.ok(at)
    assert len(calls) == 1 and "epsilons" not in calls[0]
    assert _one_line(at, "Note: ε = 0 on every rung (logits only)")


@pytest.mark.slow
def test_an_onnx_run_says_it_has_no_gradients(pages, digits_run) -> None:
    onnx = dataclasses.replace(digits_run, run_id="tiny-digits-onnx", model=None, onnx_file="digits.onnx")
    at = _ladder(pages, onnx)
    pages.ok(at)
    assert not [r for r in at.radio if r.key == session.STUDY_EPS_GRID]
    assert _one_line(at, f"ε searched from rung 3 on: none (ε = 0). {onnx_model.NO_EPS}.")


def _objectives(pages, run, **state):
    return pages.open(
        "Objectives.py",
        run,
        **{
            session.OBJ_DATASET: "digits",
            session.OBJ_MODEL: "cnn8",
            session.OBJ_OBJECTIVES: ["cross-entropy"],
            session.OBJ_EPOCHS: 1,
            session.OBJ_SEEDS: 2,
            **state,
        },
    )


@pytest.mark.slow
def test_the_objectives_page_passes_the_grid_to_its_honest_selection(pages, digits_run, monkeypatch) -> None:
    from relu_core.studies import objectives

    calls = _recording(monkeypatch, objectives, "objectives_study")
    at = _objectives(pages, digits_run)
    pages.ok(at)
    radio = at.radio(key=session.OBJ_EPS_GRID)
    assert radio.value == "none" and radio.options == [eps_choice.SHORT_LABELS[name] for name in eps_choice.GRIDS]
    radio.set_value("cpu").run()
    pages.ok(at)
    # a narrow column: the grids' values and the chosen one's cost in the control's help, not in a caption
    assert CPU_GRID in at.radio(key=session.OBJ_EPS_GRID).help and "0.0005" in at.radio(key=session.OBJ_EPS_GRID).help
    at.button(key=session.run_button_key(session.OBJECTIVES_PAGE)).click().run()
    pages.ok(at)
    assert [call.get("epsilons") for call in calls] == [preprocessing.CPU_EPSILONS]
    assert f"T, λ and ε chosen inside the tuning split, {CPU_GRID}" in at.markdown[0].value
    assert _one_line(at, f"T, λ and ε chosen inside each tuning split, {CPU_GRID}")
    # fixed T and λ select nothing: one line says ε stays 0, and the study gets no grid
    at.radio(key=session.OBJ_SELECTION).set_value("fixed").run()
    pages.ok(at)
    assert not [r for r in at.radio if r.key == session.OBJ_EPS_GRID]
    assert _one_line(at, "ε searched with T and λ: none (ε = 0). ε is searched by the selection")
