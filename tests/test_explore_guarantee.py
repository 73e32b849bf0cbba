"""Explore at a guaranteed risk (``relu_core.explore.guarantee``, ``Setting(op_kind="risk")``): the thresholds are
the library's certificates on a calibration half of the view's evaluation split, the marks and counts are read on
the other half, the exported detector certifies the same threshold, the report says the guarantee in words, and
the page draws the mode (controls, plain words, table, marks) without an error."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from apptest_charts import charts, html_texts

from relu_core import detector_export, explore, risk_control, runs


def _run(n: int = 4000, seed: int = 0) -> runs.Run:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 6, n)
    logits = rng.normal(size=(n, 6)) + 2.5 * rng.uniform(0.3, 1.5, (n, 1)) * np.eye(6)[labels]
    return runs.Run.from_logits(logits.astype(np.float32), labels, tuple("abcdef"), source="seeded logits (test)")


RISKY = {"op_kind": "risk", "op_target": 0.1, "op_delta": 0.2}


def test_the_view_certifies_on_a_calibration_half_and_reads_the_other():
    run = _run()
    setting = explore.Setting(detectors=("relu", "doctor", "msp"), seed=3)
    view = explore.view(run, setting)
    marked = view.marked(setting.replace(**RISKY))
    certified = marked.guarantee
    cal_idx, eval_idx = risk_control.calibration_split(view.eval_idx, 3)
    assert np.array_equal(certified.eval_idx, eval_idx) and np.array_equal(marked.eval_idx, eval_idx)
    for key in ("relu", "doctor", "msp"):
        u = view.detectors[key].eval_uncertainty
        cal = np.isin(view.eval_idx, cal_idx)
        expected = risk_control.guaranteed_risk(u[cal], view.correct_eval[cal], 0.1, 0.2)
        found = certified.results[key]
        assert found.certificate == expected
        point = marked.points[key]
        assert point.accepted.size == eval_idx.size
        np.testing.assert_array_equal(point.accepted, u[~cal] <= expected.threshold)
        assert point.coverage == found.evaluation.coverage
        assert point.risk == pytest.approx(found.evaluation.risk)
    table = explore.tables.operating_table(view, setting.replace(**RISKY))
    assert (table["accepted"] + table["rejected"] == eval_idx.size).all()
    # the risk-coverage chart marks each certified point (on the evaluation half) and the line of r*
    figure = marked.rc
    data = figure["data"] if isinstance(figure, dict) else figure.to_dict()["data"]
    marks = {t["name"]: t for t in data if t["name"].endswith("certified threshold (evaluation half)")}
    assert set(marks) == {f"{n} certified threshold (evaluation half)" for n in ("Rel-U", "Doctor", "MSP")}
    assert marks["Rel-U certified threshold (evaluation half)"]["x"] == [marked.points["relu"].coverage]
    line = next(t for t in data if t["name"].startswith("r* = 10 %"))
    assert line["y"] == [0.1, 0.1]


def test_rel_u_minus_doctor_in_coverage_and_the_plain_words():
    run = _run(seed=1)
    view = explore.view(run, explore.Setting())
    certified = view.marked(explore.Setting(**RISKY)).guarantee
    paired = certified.ensure_paired()
    relu, doctor = (certified.results[k].evaluation.coverage for k in ("relu", "doctor"))
    assert paired.estimate == pytest.approx(relu - doctor, abs=1e-12)
    assert paired.low <= paired.estimate <= paired.high and paired.n_resamples == 1000
    assert paired.draws == 200 and paired.draw_low <= paired.draw_high
    words = certified.sentence()
    assert words.startswith("At most 10 % errors among accepted, with 80 % confidence: Rel-U lets you act on ")
    assert f"Doctor on {risk_control.percent(doctor)}" in words
    html = explore.guarantee_html(view, explore.Setting(**RISKY))
    assert "Rel-U − Doctor in coverage on the evaluation half" in html and paired.verdict().split(" (")[0] in html


def test_a_refused_guarantee_says_why_and_marks_nothing():
    run = _run(n=400)
    view = explore.view(run, explore.Setting())
    setting = explore.Setting(op_kind="risk", op_target=0.005, op_delta=0.01)  # 919 samples needed, 100 given
    certified = view.marked(setting).guarantee
    assert all(not r.certificate.certified for r in certified.results.values())
    assert "cannot guarantee it here (too few calibration samples" in certified.sentence()
    data = view.marked(setting).rc.to_dict()["data"]
    assert not [t for t in data if "certified threshold" in t["name"]]
    from studio import explore_export

    assert explore_export.export_refusal(view, setting).startswith(
        "Rel-U cannot be exported at this guarantee: too few"
    )


def test_the_exported_detector_certifies_the_threshold_explore_shows():
    run = _run(seed=2)
    setting = explore.Setting(**RISKY)
    certified = explore.view(run, setting).marked(setting).guarantee
    archive = zipfile.ZipFile(io.BytesIO(detector_export.export_zip(run, detector_export.from_setting(run, setting))))
    card = json.loads(archive.read("detector.json"))
    assert card["threshold"] == pytest.approx(certified.results["relu"].certificate.threshold, rel=1e-9)
    assert card["operating_point"]["guarantee"]["n_calibration"] == certified.cal_pos.size


def test_the_report_says_the_guarantee_in_words():
    run = _run(seed=4)
    setting = explore.Setting(**RISKY)
    page = explore.report_html(run, explore.view(run, setting), setting)
    assert "At most 10 % errors among accepted, with 80 % confidence: Rel-U lets you act on" in page
    assert "Rel-U − Doctor in coverage on the evaluation half" in page


@pytest.mark.slow
def test_explore_draws_the_guaranteed_risk_mode(pages):
    from studio import session

    run = _run(seed=5)
    at = pages.open(
        "Explore.py",
        run,
        **{session.EX_OP_KIND: session.OP_KINDS["risk"], session.EX_OP_RISK: 0.1, session.EX_OP_DELTA: 0.2},
    )
    pages.ok(at)
    texts = " ".join(html_texts(at)) + " ".join(m.value for m in at.markdown)
    assert "At most 10 % errors among accepted, with 80 % confidence: Rel-U lets you act on" in texts
    assert "certified" in texts and "coverage (evaluation)" in texts
    risk_chart = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Risk-coverage"))
    assert any(t["name"] == "Rel-U certified threshold (evaluation half)" for t in risk_chart["data"])
    assert not at.select_slider(key=session.EX_OP_RISK).disabled
    assert at.slider(key=session.EX_OP_TARGET).disabled
    button = next(b for b in at.get("download_button") if b.proto.label == "Export this detector")
    assert not button.proto.disabled


def test_a_realised_risk_above_r_star_is_explained_beside_the_table():
    """Issue 43: "At most 5 % errors among accepted" beside a realised risk of 0.0543 on the evaluation half, without
    a word. The line names the detectors above r* and says why the guarantee still holds."""
    import dataclasses

    run = _run()
    setting = explore.Setting(seed=1).replace(**RISKY)
    certified = explore.view(run, setting).marked(setting).guarantee
    rates = certified.rates
    below = {k: {**r, "risk": dataclasses.replace(r["risk"], estimate=0.08)} for k, r in rates.items()}
    certified.__dict__["rates"] = below  # the cached property, as if both were under r* = 10 %
    general = certified.realised_note()
    assert general.startswith("The realised risk on the evaluation half may exceed r* while the guarantee holds: ")
    assert "80 % over the calibration draw" in general and f"{certified.eval_pos.size:,} evaluation samples" in general
    above = {**below, "relu": {**below["relu"], "risk": dataclasses.replace(below["relu"]["risk"], estimate=0.1043)}}
    certified.__dict__["rates"] = above
    named = certified.realised_note()
    assert named.startswith("Rel-U's (0.1043) realised risk is above r* = 10 % on this evaluation half, and the ")
    assert "guarantee still holds" in named and "Doctor" not in named.split(":")[0]
    certified.__dict__["rates"] = rates
    assert certified.results["relu"].certificate.certified  # the seeded run certifies: the note is for a real view
