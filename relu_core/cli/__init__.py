"""Headless command line:
``python -m relu_core {evaluate,demo,logits,models,datasets,report,study,baselines,train,export}``.

The package holds one module per family of commands (``evaluate``: evaluate, demo; ``logits``: logits, models,
datasets; ``report``, ``baselines``, ``study``, ``train``, ``export``), each importing ``shared`` (what the commands
share) and no other command module; this ``__init__`` only builds the top-level parser, registers each command
module's subcommands and dispatches. Every bad input (missing or malformed file, NaN logits,
wrong shapes, labels out of range, an unknown method, model or data set, a fraction outside (0, 1), a one-class split) ends with
exit code 2 and one line ``error: ...`` on stderr, never a traceback; a cancelled run (Ctrl-C) ends with exit
code 130. Long work draws a text progress bar on stderr; results go to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
import zipfile
from collections.abc import Sequence

from relu_core.cli import baselines, evaluate, export, logits, report, study, train
from relu_core.cli.shared import ProgressBar
from relu_core.errors import Cancelled, printable

EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


class _UsageError(Exception):
    """A command-line usage error, reported as one line like every other bad input."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # no abbreviations: "--seed 3" would silently mean evaluate's "--seeds 3" (report's --seed is a split seed)
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> None:  # argparse would print the usage block and exit
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m relu_core", description="Rel-U Studio, headless.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for commands in (evaluate, logits, report, baselines, study, train, export):
        commands.add_parser(sub)
    return parser


# --------------------------------------------------------------------------------------------- main
def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"no such file: {exc.filename}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(printable(text).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad input, 1 runtime failure, 130 cancelled).

    Warnings raised on the way (e.g. numpy's overflow warning on a hostile file) are held back: a failed
    run prints only its one error line, a successful one prints each distinct warning as one line.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        # our use of TorchScript to read the user's file, not something the user can change
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated")
        status = _run(argv)
    if status == 0:
        for message in dict.fromkeys(_one_line(w.message) for w in caught):
            print(f"warning: {message}", file=sys.stderr)
    return status


def _run(argv: Sequence[str] | None) -> int:
    bar = ProgressBar(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args, bar)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except BrokenPipeError:  # the reader of stdout stopped early (``| head``): nothing to say to it any more
        bar.close()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error while exiting
        return 1
    except (Cancelled, KeyboardInterrupt):
        bar.close()
        print("error: cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except (_UsageError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        bar.close()
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:  # e.g. a model that cannot read these inputs: still one line, no traceback
        bar.close()
        print(f"error: {_one_line(exc).split(' Exception raised from')[0]}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug or an exhausted resource: one line, never a traceback
        bar.close()
        print(f"error: unexpected {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1
