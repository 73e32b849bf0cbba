"""MkDocs hook: the Python API page lists every public name of ``relu_core`` from the package's own table.

``docs/reference/api.md`` holds the marker ``<!-- api-reference -->``; this hook replaces it with one section per
submodule and one mkdocstrings directive (``::: relu_core.MODULE.NAME``) per public name, taken from
``relu_core._EXPORTS`` (the table ``relu_core.__all__`` is built from), so a name added to the package appears
here without an edit. mkdocstrings then renders each directive from the numpydoc docstring.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MARKER = "<!-- api-reference -->"
#: A Sphinx role before inline code in a rendered docstring (``:func:`x` `` renders as ``:func:<code>x</code>``).
_ROLE = re.compile(r":(?:func|class|data|meth|attr|mod|exc|obj):(?=<code>)")
PAGE = "reference/api.md"

_ROOT = Path(__file__).resolve().parents[2]


def _importable() -> None:
    """Put the checkout on ``sys.path`` (mkdocs restores ``sys.path`` after loading a hook, so at build time)."""
    if str(_ROOT) not in sys.path:
        sys.path.insert(0, str(_ROOT))


#: Section titles of the submodules, in the page's order; a submodule missing here gets its own name.
TITLES = {
    "detectors": "Detectors",
    "metrics": "Metrics",
    "protocol": "The protocol",
    "stats": "The paired comparison",
    "risk_control": "A guaranteed risk",
    "figures": "Figures",
    "runs": "Runs and logits",
    "errors": "Errors",
}


def render() -> str:
    """The generated Markdown: a heading per submodule, a mkdocstrings directive per public name."""
    _importable()
    import relu_core

    by_module: dict[str, list[str]] = {}
    for name, module in relu_core._EXPORTS.items():
        by_module.setdefault(module, []).append(name)
    order = sorted(by_module, key=lambda m: (list(TITLES).index(m) if m in TITLES else len(TITLES), m))
    parts = []
    for module in order:
        parts += [f"## {TITLES.get(module, module)} (`relu_core.{module}`)", ""]
        for name in by_module[module]:
            parts += [f"::: relu_core.{module}.{name}", "    options:", "      heading_level: 3", ""]
    parts += ["## Version", "", f"`relu_core.__version__` is the library's version (`{relu_core.__version__}`).", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs hook signature)
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER}: the API reference would not be generated")
    return markdown.replace(MARKER, render())


def on_page_content(html: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs hook signature)
    """The docstrings' Sphinx roles (``:func:``, ``:class:`` ...) dropped before their names, which stay code."""
    if page.file.src_uri != PAGE:
        return html
    return _ROLE.sub("", html)
