"""Every session-state and widget key of the pages and the glue is declared in ``studio/session.py``: an AST scan
finds no string written as a ``key=`` argument or as a subscript / ``get`` / ``setdefault`` / ``pop`` of
``st.session_state`` in ``app.py``, ``app_pages/`` and ``studio/``."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCANNED = [
    REPO / "app.py",
    *sorted((REPO / "app_pages").glob("*.py")),
    *(path for path in sorted((REPO / "studio").glob("*.py")) if path.name != "session.py"),
]
STATE_METHODS = {"get", "setdefault", "pop"}


def _written(node: ast.expr) -> bool:
    """A string written in the source: a literal or an f-string."""
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _is_session_state(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def _literal_keys(source: str) -> list[tuple[int, str]]:
    """(line, code) of every key written as a string instead of a name of ``studio.session``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            found += [(node.lineno, ast.unparse(kw)) for kw in node.keywords if kw.arg == "key" and _written(kw.value)]
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in STATE_METHODS
                and _is_session_state(func.value)
                and node.args
                and _written(node.args[0])
            ):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and _is_session_state(node.value) and _written(node.slice):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_sees_every_way_of_writing_a_key() -> None:
    source = (
        "st.button('Run', key='run')\n"
        "st.button('Cancel', key=f'cancel_{job}')\n"
        "st.session_state['a'] = st.session_state.get('b', 0)\n"
        "st.session_state.setdefault(f'c_{x}', 1)\n"
        "st.button('Fine', key=session.RUN, on_click=lambda: st.session_state[session.RUN_ID])\n"
        "sorted(values, key=lambda v: v)\n"
    )
    assert [line for line, _ in _literal_keys(source)] == [1, 2, 3, 3, 4]


def test_pages_and_glue_name_keys_only_through_studio_session() -> None:
    assert len(SCANNED) >= 9  # Start, four pages, the glue modules
    literal = [
        f"{path.relative_to(REPO)}:{line}: {code}"
        for path in SCANNED
        for line, code in _literal_keys(path.read_text(encoding="utf-8"))
    ]
    assert not literal, literal
