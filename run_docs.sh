#!/usr/bin/env bash
# Serves the manual (docs/, MkDocs + Material) at http://127.0.0.1:8000 and rebuilds it on every edit.
# Installs what is missing first, like run_app.sh; extra arguments go to `mkdocs serve` (e.g. -a 127.0.0.1:8001).
set -euo pipefail
cd "$(dirname "$0")"
# pip runs only when .venv was not built from these very files (their SHA-256 in .venv/.requirements-stamp)
source .ci/ensure_venv.sh
ensure_venv requirements.txt requirements-docs.txt
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs serve "$@"
