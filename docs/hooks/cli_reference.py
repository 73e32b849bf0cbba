"""MkDocs hook: the CLI reference page, generated from the argparse parsers at build time so it cannot drift.

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with one section per
command (and per ``study`` subcommand), each with the command's ``--help`` exactly as
``python -m relu_core COMMAND --help`` prints it at a fixed width of 100 columns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"
WIDTH = 100

_ROOT = Path(__file__).resolve().parents[2]


def _importable() -> None:
    """Put the checkout on ``sys.path`` (mkdocs restores ``sys.path`` after loading a hook, so at build time)."""
    if str(_ROOT) not in sys.path:
        sys.path.insert(0, str(_ROOT))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The (name, parser) of every subcommand of ``parser``, in the order they were added."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command path (``("study", "ablation")`` ...) below ``parser``, depth first, with its parser."""
    out = []
    for name, sub in _subcommands(parser):
        path = (*prefix, name)
        out.append((path, sub))
        out.extend(commands(sub, path))
    return out


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    return parser.format_help().rstrip()


def render() -> str:
    """The generated Markdown: one section per command with its help in a code block."""
    _importable()
    from relu_core.cli import build_parser

    parser = build_parser()
    parts = ["## `python -m relu_core`", "", "```text", _help(parser), "```", ""]
    for path, sub in commands(parser):
        level = "#" * (2 + len(path) - 1)
        parts += [f"{level} `{' '.join(path)}`", "", "```text", _help(sub), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs hook signature)
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER}: the CLI reference would not be generated")
    return markdown.replace(MARKER, render())
