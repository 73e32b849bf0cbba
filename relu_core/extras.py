"""The optional dependencies (``pyproject.toml``'s extras) and the one line that names the extra to install when
one is missing: ``pip install .`` installs the library without them, and a path that needs one says so (an
InputError: exit 2 on the command line) instead of failing with ``ModuleNotFoundError``."""

from __future__ import annotations

import importlib
from types import ModuleType

from relu_core.errors import InputError

#: The extra that installs each optional package (``pip install "relu-core[<extra>]"``).
EXTRA_OF = {
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "google.protobuf": "onnx",
    "imagecorruptions": "corruptions",
}


def missing(package: str, purpose: str) -> InputError:
    """The error for an optional ``package`` that is not installed, naming what needs it and the extra."""
    extra = next((e for name, e in EXTRA_OF.items() if package == name or package.startswith(f"{name}.")), None)
    install = f'pip install "relu-core[{extra}]"' if extra else f"pip install {package.split('.')[0]}"
    where = f" (the [{extra}] extra)" if extra else ""
    return InputError(f"{purpose} needs the optional package {package!r}{where}, which is not installed: {install}")


def require(package: str, purpose: str) -> ModuleType:
    """The optional module ``package`` (e.g. "onnx"), imported; InputError naming the extra to install when it
    is missing (:func:`missing`). ``purpose`` says what needs it ("exporting a detector as ONNX")."""
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as exc:
        top = package.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] not in (top, package):
            raise  # the package is there but one of its own dependencies is not: not ours to word
        raise missing(package, purpose) from None
