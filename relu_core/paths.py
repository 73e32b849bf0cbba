"""Where Rel-U Studio keeps its caches and looks for data sets and weights.

``RELU_STUDIO_CACHE`` overrides the cache directory (default: ``data_cache/`` in a source checkout,
``$XDG_CACHE_HOME/relu-studio`` (``~/.cache/relu-studio``) when the package is installed);
``RELU_STUDIO_DATA`` names one more read-only data directory (for example ``../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "RELU_STUDIO_CACHE"
DATA_ENV = "RELU_STUDIO_DATA"


def repo_root() -> Path:
    """The directory that holds ``relu_core/``: a source checkout, or ``site-packages`` when installed."""
    return Path(__file__).resolve().parent.parent


def default_cache_dir() -> Path:
    """``data_cache/`` beside the code in a source checkout (git-ignored); the user's cache directory when the
    package is installed (never inside ``site-packages``)."""
    root = repo_root()
    if (root / "pyproject.toml").is_file():
        return root / "data_cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "relu-studio"


def cache_dir(sub: str | None = None) -> Path:
    """The writable cache directory (or its subdirectory ``sub``), created on demand."""
    root = Path(os.environ.get(CACHE_ENV) or default_cache_dir())
    path = root / sub if sub else root
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dirs() -> list[Path]:
    """Directories searched for data sets and weights, in order: the cache, then ``$RELU_STUDIO_DATA``."""
    candidates = [cache_dir()]
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]).expanduser())
    return [p for p in candidates if p.is_dir()]


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a report may name it: relative to the data root (``$RELU_STUDIO_DATA/...``) or the cache
    (``$RELU_STUDIO_CACHE/...``), never the server's absolute path; an absolute path outside both by its name alone, a relative one as given."""
    if not Path(path).expanduser().is_absolute():  # a name, or a place in words ("scikit-learn (bundled)")
        return str(path)
    path = Path(path).expanduser().resolve()
    roots = [(DATA_ENV, os.environ.get(DATA_ENV)), (CACHE_ENV, cache_dir())]
    for name, root in roots:
        if root and path.is_relative_to(Path(root).expanduser().resolve()):
            return f"${name}/{path.relative_to(Path(root).expanduser().resolve()).as_posix()}"
    return path.name
