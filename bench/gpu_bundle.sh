#!/usr/bin/env bash
# Prepares, on this machine, what bench/gpu_check.sh needs on a lent GPU machine, which reaches no network and gets
# only a copy of the worktree (64 MiB in all, ignored paths only when carried):
#   .gpu/data.tar.gz  the CIFAR-10 JPEG folders (50,000 train + 10,000 test, quality 75), batches.meta, the exact
#                     1,017-image prefix and the pretrained ResNet-20 (a CUDA test reads both) and ResNet-56 (the
#                     ladder with the authors' ε grid) from
#                     $RELU_STUDIO_DATA (default ../shared/data): about 24 MB, gzip keeps the JPEG bytes exact
#   .gpu/wheels/      the pinned plotly (pure Python; the machine lacks it) and pandas (the machine's may be another
#                     version) for its Python 3.12 (the device tool's KINDS.md lists what is installed there)
# Then, with the device tool: run(command="bash bench/gpu_check.sh", carry=[".gpu"], timeout_s=600).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${RELU_STUDIO_DATA:-../shared/data}"
mkdir -p .gpu/wheels
resnet20="$(cd "$DATA" && ls weights/cifar10_resnet_akamaster/resnet20-*.th | head -1)"
resnet56="$(cd "$DATA" && ls weights/cifar10_resnet_akamaster/resnet56-*.th | head -1)"
tar -czf .gpu/data.tar.gz -C "$DATA" cifar10/train_jpeg_q75 cifar10/test_jpeg_q75 cifar10/batches.meta \
  cifar10/cifar10_test_lossless_prefix1017.npz "$resnet20" "$resnet56" weights/cifar10_resnet_akamaster/LICENSE
rm -f .gpu/wheels/*.whl
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels \
  $(grep -E '^(plotly|pandas)==' requirements.txt)
du -sh .gpu .gpu/data.tar.gz .gpu/wheels
