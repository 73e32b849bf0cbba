#!/usr/bin/env bash
# Installs everything Rel-U Studio's tests need on a fresh machine (Python 3.11, pip, apt), runs ruff, then all tests.
set -euo pipefail
cd "$(dirname "$0")"

# Debian's chromium drives the one real-browser test (never `playwright install`: it downloads a browser).
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# pip runs only when .venv was not built from these very files (their SHA-256 in .venv/.requirements-stamp)
source .ci/ensure_venv.sh
REQUIREMENTS=(requirements.txt requirements-dev.txt)
[ -f requirements-docs.txt ] && REQUIREMENTS+=(requirements-docs.txt)
ensure_venv "${REQUIREMENTS[@]}"

# Lint and formatting first (settings in pyproject.toml); either failing fails the run before any test.
.venv/bin/ruff check .
.venv/bin/ruff format --check .

# The manual (docs/, mkdocs.yml): broken links, missing pages and docstring warnings fail the build.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"

export RELU_STUDIO_DATA="${RELU_STUDIO_DATA:-$(cd .. && pwd)/shared/data}"
exec .venv/bin/python -m pytest "$@"
