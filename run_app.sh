#!/usr/bin/env bash
# Installs Rel-U Studio's runtime dependencies and opens the dashboard on its default run: Fashion-MNIST + a small
# CNN (trained here on first use, about 40 s, then cached); digits where no Fashion-MNIST can be had.
set -euo pipefail
cd "$(dirname "$0")"

# The default run's data set: ../shared/data when present, else Debian's dataset-fashion-mnist package (installed
# with apt when missing, like run_tests.sh installs chromium); without either the default falls back to digits.
if [ -z "${RELU_STUDIO_DATA:-}" ] && [ -d ../shared/data ]; then
  export RELU_STUDIO_DATA="$(cd ../shared/data && pwd)"
fi
if [ ! -d /usr/share/datasets/fashion-mnist ] && [ ! -d "${RELU_STUDIO_DATA:-/nonexistent}/fashion-mnist" ] \
   && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dataset-fashion-mnist \
      >/dev/null; } || echo "run_app.sh: dataset-fashion-mnist could not be installed; the default run uses digits" >&2
fi

# pip runs only when .venv was not built from this very file (its SHA-256 in .venv/.requirements-stamp)
source .ci/ensure_venv.sh
ensure_venv requirements.txt
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
