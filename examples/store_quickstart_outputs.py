"""Execute ``examples/quickstart.ipynb`` and store its outputs in the file, each plotly figure with a PNG of itself,
so that the notebook shows its numbers and figures where it is only read (GitHub draws no plotly: it shows the
PNG; Jupyter shows the interactive figure from the same output).

    RELU_STUDIO_DATA=../shared/data .venv/bin/python examples/store_quickstart_outputs.py

A maintainer's step, run after editing the notebook: it needs the shared data (the notebook's CIFAR-10 run) and
the browser of the browser tests (Debian's ``/usr/bin/chromium`` through playwright, from requirements-dev.txt),
which draws each figure with the plotly.js of the installed plotly (``Plotly.toImage``, offline). Kept out of an
output: plotly's ``text/html`` (a copy of plotly.js per figure, megabytes) and the kernel's timing metadata.
``tests/test_package.py`` checks that the stored file has a PNG beside every figure.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
#: The PNG's size in CSS pixels (a matrix's, whose axes keep one scale: squarer), drawn at twice that resolution
#: (sharp on a high-density screen).
WIDTH, HEIGHT, MATRIX_SIZE, SCALE = 720, 480, (620, 600), 2
PLOTLY_JSON = "application/vnd.plotly.v1+json"


def figure_png(page, figure: dict) -> bytes:
    """The PNG of one plotly figure (its JSON), drawn by plotly.js in ``page``."""
    size = MATRIX_SIZE if any(trace.get("type") == "heatmap" for trace in figure["data"]) else (WIDTH, HEIGHT)
    data_url = page.evaluate(
        """async ([figure, width, height, scale]) => {
               const div = document.createElement('div');
               document.body.appendChild(div);
               // drawn at the image's size first: the tick labels' margins are measured at that size
               await Plotly.newPlot(div, figure.data, {...figure.layout, width, height}, {staticPlot: true});
               const url = await Plotly.toImage(div, {format: 'png', width, height, scale});
               Plotly.purge(div); div.remove();
               return url; }""",
        [figure, *size, SCALE],
    )
    return base64.b64decode(data_url.split(",", 1)[1])


def executed(path: Path):
    """The notebook run top to bottom in a kernel that imports this checkout's relu_core."""
    import nbformat
    from nbclient import NotebookClient

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    return notebook


def store(path: Path = NOTEBOOK) -> int:
    """Execute ``path``, add a PNG to each plotly output, write it back; returns how many figures were drawn."""
    import nbformat
    from playwright.sync_api import sync_playwright
    from plotly.offline import get_plotlyjs

    sys.path.insert(0, str(REPO))
    from studio.headless import CHROMIUM, CHROMIUM_ARGS

    notebook = executed(path)
    drawn = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_content(f"<html><head><script>{get_plotlyjs()}</script></head><body></body></html>")
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            cell.metadata.pop("execution", None)
            for output in cell.outputs:
                data = output.get("data", {})
                data.pop("text/html", None)
                if PLOTLY_JSON in data:
                    figure = json.loads(json.dumps(data[PLOTLY_JSON]))
                    data["image/png"] = base64.b64encode(figure_png(page, figure)).decode("ascii")
                    data["text/plain"] = f"<plotly figure: {figure['layout'].get('title', {}).get('text', '')}>"
                    drawn += 1
        browser.close()
    nbformat.write(notebook, path)
    return drawn


if __name__ == "__main__":
    print(f"{store()} figures drawn into {NOTEBOOK.relative_to(REPO)}")
