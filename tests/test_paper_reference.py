"""The paper's numbers for a run's data set (issue 41): Table 1's rows in the HTML report, the data ZIP and the CLI
``evaluate`` (text and ``--json``), every number checked against the shipped CSV read here with the csv module,
not through ``relu_core.studies.paper_table``."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from relu_core import cli, explore, runs
from relu_core.cli.evaluate import PAPER_KEY
from relu_core.studies import paper_table

TABLE1_CSV = Path(paper_table.PACKAGED_FOLDER) / "table1_fpr95.csv"
FIVE_BEST = "selected on the evaluation split by the authors' five-best aggregation"
LABEL = "paper, Table 1 (tab:main_misclassification_detection)"
DETECTORS = (("msp", "MSP"), ("odin", "ODIN"), ("doctor", "Doctor"), ("relu", "Rel-U"))


def _csv_rows(dataset: str) -> list[dict[str, str]]:
    with TABLE1_CSV.open(newline="", encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle) if row["dataset"] == dataset]


def _printed(row: dict[str, str], key: str) -> str:
    """The paper's ``mean (std)`` in % with one decimal, from the CSV's cells."""
    return f"{float(row[f'{key}_fpr95']):.1f} ({float(row[f'{key}_std']):.1f})"


def _logits(n_classes: int, n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    logits = rng.normal(size=(n, n_classes)) + 2.0 * np.eye(n_classes)[labels] * rng.random((n, 1))
    return logits.astype(np.float32), labels


def _run(name: str, n_classes: int):
    logits, labels = _logits(n_classes)
    buffer = io.BytesIO()
    np.savez(buffer, logits=logits, labels=labels)
    return runs.load_logits_upload(buffer.getvalue(), name)


def _section(page: str) -> str:
    match = re.search(r'<h2 id="paper-reference">(.*?)(?=<h2>)', page, re.S)
    assert match, "the report has no paper section"
    return match.group(1)


def _table(section: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.S)
    return [[html.unescape(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]


@pytest.fixture(scope="module")
def cifar10_report() -> tuple[object, str, bytes]:
    run = _run("cifar10.npz", 10)  # a logits file's data set is its name
    setting = explore.Setting(temperature=1.0, lam=0.5, tune_fraction=0.5, seed=0, detectors=("relu", "doctor"))
    view = explore.view(run, setting)
    return run, explore.report_html(run, view, setting), explore.view_zip(run, view, setting)


def test_the_report_shows_table1_s_rows_of_the_run_s_data_set_as_the_csv_prints_them(cifar10_report):
    run, page, _ = cifar10_report
    section = _section(page)
    assert section.startswith(html.escape(paper_table.REFERENCE_TITLE))
    assert html.escape(FIVE_BEST) in section and html.escape(LABEL) in section
    header, *body = _table(section)
    assert header == ["row", "network", "objective", "accuracy %", *(f"{n} FPR95 %" for _, n in DETECTORS), "note"]
    expected = _csv_rows("CIFAR-10")
    assert len(body) == len(expected) == 10  # both of the paper's networks, five objectives each
    shown = {(cells[1], cells[2]): cells for cells in body}
    assert (
        {(row["network"], row["objective"]) for row in expected}
        == set(shown)
        == {
            (network, objective)
            for network in ("DenseNet-121", "ResNet-34")
            for objective in ("CrossEntropy", "LogitNorm", "Mixup", "OpenMix", "RegMixUp")
        }
    )
    for row in expected:
        cells = shown[(row["network"], row["objective"])]
        assert cells[0] == LABEL
        assert cells[3] == f"{float(row['accuracy']):.1f}"
        assert cells[4:8] == [_printed(row, key) for key, _ in DETECTORS]
        assert f"the paper's {row['network']}, {float(row['accuracy']):.1f} % accuracy" in cells[8]
        assert "a different network from ours" in cells[8]  # a logits file: no network of ours recorded
    # the line on our network, and (where the shared data's CIFAR-10 test split is the JPEG folder) the images
    assert "our network differs from the paper&#x27;s (DenseNet-121, ResNet-34)" in section
    accuracy = 100 * np.mean(np.argmax(run.logits, 1) == run.labels)
    assert f"{accuracy:.1f} % accuracy on the run&#x27;s {len(run.labels)} samples" in section
    # an uploaded logits file named cifar10: where its images came from is not known, so no JPEG line
    assert run.source.endswith(paper_table.UPLOADED) and paper_table.images_note(run) is None
    assert "JPEG" not in section


def test_the_data_zip_carries_the_same_rows(cifar10_report):
    _, _, data = cifar10_report
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        rows = list(csv.DictReader(io.StringIO(archive.read("paper_reference.csv").decode())))
        described = json.loads(archive.read("settings.json"))
    expected = {(row["network"], row["objective"]): row for row in _csv_rows("CIFAR-10")}
    assert len(rows) == len(expected)
    for row in rows:
        theirs = expected[(row["network"], row["objective"])]
        assert row["row"] == LABEL and row["MSP FPR95 %"] == _printed(theirs, "msp")
        assert row["Rel-U FPR95 %"] == _printed(theirs, "relu")
    assert described["paper_reference"]["title"] == paper_table.REFERENCE_TITLE
    assert FIVE_BEST in described["paper_reference"]["heading"]


def test_a_report_of_a_data_set_without_a_paper_table_says_so_in_one_line():
    run = _run("fashion-mnist.npz", 10)
    setting = explore.Setting(temperature=1.0, lam=0.5, tune_fraction=0.5, seed=0, detectors=("relu", "doctor"))
    view = explore.view(run, setting)
    section = _section(explore.report_html(run, view, setting))
    assert "<table>" not in section
    lines = re.findall(r'<p class="note">(.*?)</p>', section)
    assert lines == [html.escape(paper_table.no_table("table1", "fashion-mnist"))]
    assert "No paper reference for fashion-mnist" in lines[0] and "CIFAR-10, CIFAR-100 only" in lines[0]
    with zipfile.ZipFile(io.BytesIO(explore.view_zip(run, view, setting))) as archive:
        assert "paper_reference.csv" not in archive.namelist()
        described = json.loads(archive.read("settings.json"))["paper_reference"]
    assert described["notes"] == [paper_table.no_table("table1", "fashion-mnist")] and described["heading"] is None


def test_our_network_is_named_the_same_where_the_paper_has_it():
    logits, labels = _logits(100, n=300)
    run = SimpleNamespace(
        dataset_name="cifar100-test", model_name="resnet34_cifar", source="", logits=logits, labels=labels
    )
    frame, notes = paper_table.table1_reference(run)
    assert list(frame["network"]) == ["ResNet-34", "DenseNet-121"] * 5  # by objective, ours first in each
    assert all(note.endswith("the same network as ours") for note in frame["note"][frame["network"] == "ResNet-34"])
    assert "the paper's ResNet-34 architecture, trained and evaluated by us" in notes[0]
    assert notes[1:] == []  # CIFAR-100: no JPEG folder
    jpeg = SimpleNamespace(dataset_name="cifar10-test", model_name="resnet56", source=JPEG_SOURCE, logits=logits)
    frame, notes = paper_table.table1_reference(SimpleNamespace(**vars(jpeg), labels=labels))
    assert len(frame) == 10 and "our network differs" in notes[0] and "CIFAR-10 JPEG folder" in notes[1]


def _evaluate(tmp_path: Path, name: str, n_classes: int, *extra: str, capsys) -> str:
    logits, labels = _logits(n_classes)
    path = tmp_path / name
    np.savez(path, logits=logits, labels=labels)
    argv = ["evaluate", "--logits", str(path), "--seeds", "2", "--bootstrap", "0", "--methods", "relu,doctor"]
    assert cli.main([*argv, *extra]) == 0
    return capsys.readouterr().out


def test_evaluate_json_carries_the_paper_s_rows_of_the_data_set(tmp_path, capsys):
    got = json.loads(_evaluate(tmp_path, "cifar100.npz", 100, "--json", capsys=capsys))
    assert list(got) == ["relu", "doctor", PAPER_KEY]  # the detectors, then the one other key
    reference = got[PAPER_KEY]
    assert reference["note"] is None and FIVE_BEST in reference["heading"]
    assert "our network differs" in reference["network_line"] and reference["images_note"] is None
    expected = {(row["network"], row["objective"]): row for row in _csv_rows("CIFAR-100")}
    assert len(reference["rows"]) == len(expected) == 10
    for row in reference["rows"]:
        theirs = expected[(row["network"], row["objective"])]
        assert row["label"] == LABEL and row["dataset"] == "CIFAR-100"
        assert row["accuracy_percent"] == float(theirs["accuracy"])
        for key, _ in DETECTORS:
            value = row["values"][f"{key}_fpr95"]
            assert (value["mean"], value["std"], value["unit"]) == (
                float(theirs[f"{key}_fpr95"]),
                float(theirs[f"{key}_std"]),
                "percent",
            )
        assert row["network_note"].startswith(f"the paper's {row['network']}")


def test_evaluate_text_ends_with_the_paper_s_block(tmp_path, capsys):
    out = _evaluate(tmp_path, "cifar100.npz", 100, capsys=capsys)
    block = out[out.index(paper_table.REFERENCE_TITLE) :]
    assert FIVE_BEST in block and "Note: Ours: a logits file (network not recorded)" in block
    lines = [line for line in block.splitlines() if line.startswith(LABEL)]
    assert len(lines) == 10
    for row in _csv_rows("CIFAR-100"):  # each row's accuracy and four FPR95s, as the CSV prints them
        line = next(text for text in lines if row["network"] in text and f" {row['objective']} " in text)
        printed = [f"{float(row['accuracy']):.1f}", *(_printed(row, key) for key, _ in DETECTORS)]
        assert " ".join(line.split()).count(" ".join(printed)) == 1, line
    # a data set the paper has no table of: the title and one line
    out = _evaluate(tmp_path, "svhn.npz", 10, capsys=capsys)
    assert out.rstrip().endswith(f"{paper_table.REFERENCE_TITLE}\nNote: {paper_table.no_table('table1', 'svhn')}"), out[
        -400:
    ]
    got = json.loads(_evaluate(tmp_path, "svhn.npz", 10, "--json", capsys=capsys))
    assert got[PAPER_KEY]["rows"] == [] and got[PAPER_KEY]["note"] == paper_table.no_table("table1", "svhn")


def test_evaluate_protocol_paper_carries_them_too(tmp_path, capsys):
    logits, labels = _logits(100, n=500)
    path = tmp_path / "cifar100.npz"
    np.savez(path, logits=logits, labels=labels)
    argv = ["evaluate", "--logits", str(path), "--protocol", "paper", "--seeds", "1", "--r", "10"]
    assert cli.main([*argv, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert len(got[PAPER_KEY]["rows"]) == 10 and got[PAPER_KEY]["rows"][0]["label"] == LABEL
    assert cli.main(argv) == 0
    assert paper_table.REFERENCE_TITLE in capsys.readouterr().out


# ------------------------------------------------ the JPEG images line in the JSON of study objectives / paper-protocol

JPEG_SOURCE = "resnet56 on imagefolder:cifar10/test_jpeg_q75"


def test_study_objectives_json_carries_the_jpeg_line_the_text_shows():
    from relu_core import protocol
    from relu_core.cli import study as study_cli
    from relu_core.studies import objectives

    def result(dataset: str, source: str) -> objectives.ObjectivesResult:
        logits, labels = _logits(10, n=300)
        run = runs.Run.from_logits(logits, labels, tuple("abcdefghij"), source=source, dataset_name=dataset)
        fixed = protocol.evaluate(logits, labels, objectives.TABLE_KEYS, seeds=1, n_resamples=0)
        row = objectives.ObjectiveRow("cross-entropy", run, fixed)
        return objectives.ObjectivesResult(
            dataset=dataset.removesuffix("-test"), model="resnet56", epochs=1, train_seed=0, outliers=None,
            seeds=(0,), tune_fraction=0.5, selection="fixed", rows=(row,),
        )  # fmt: skip

    jpeg = result("cifar10-test", JPEG_SOURCE)
    record = json.loads(json.dumps(jpeg.to_dict()))
    assert record["paper_images_note"] == paper_table.images_note(JPEG_SOURCE) and "JPEG" in record["paper_images_note"]
    assert f"Note: {record['paper_images_note']}" in study_cli.format_objectives(jpeg)
    # no paper rows (Fashion-MNIST): no images line in either
    other = result("fashion-mnist-test", "cnn28 on fashion-mnist")
    assert other.to_dict()["paper_images_note"] is None and "JPEG" not in study_cli.format_objectives(other)


def test_study_paper_protocol_json_carries_the_jpeg_line_the_text_shows():
    from relu_core.cli import study as study_cli

    result = SimpleNamespace(study="paper-protocol")
    run = SimpleNamespace(dataset_name="cifar10-test", model_name="resnet56", source=JPEG_SOURCE)
    record = study_cli._with_paper({}, result, run)["paper_reference"]
    assert record["images_note"] == paper_table.images_note(run) and "JPEG" in record["images_note"]
    assert record["images_note"] in study_cli._paper_text(result, run)
    other = SimpleNamespace(dataset_name="digits-test", model_name="cnn8", source="")
    assert study_cli._with_paper({}, result, other)["paper_reference"]["images_note"] is None


def test_cli_report_writes_the_paper_section(tmp_path, capsys):
    logits, labels = _logits(100, n=300)
    path = tmp_path / "cifar100.npz"
    np.savez(path, logits=logits, labels=labels)
    out = tmp_path / "report.html"
    assert cli.main(["report", "--logits", str(path), "--out", str(out)]) == 0
    section = _section(out.read_text(encoding="utf-8"))
    _header, *body = _table(section)
    expected = {(row["network"], row["objective"]): row for row in _csv_rows("CIFAR-100")}
    assert len(body) == len(expected) == 10
    for cells in body:
        assert cells[4:8] == [_printed(expected[(cells[1], cells[2])], key) for key, _ in DETECTORS]
