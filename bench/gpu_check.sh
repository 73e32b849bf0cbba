#!/usr/bin/env bash
# The GPU checks of issue 35 in one command of at most 9 minutes on one H100/H200 (each part time-boxed, 515 s in
# all plus about 20 s of setup, so one
# failure or slow part does not eat the rest; everything it prints is also in $OUT/gpu_check.log, and the
# README-ready lines, each starting FIGURE, in $OUT/summary.txt):
#   1. the CUDA tests (the tests that skip without a GPU: training, augmentation, the slider's device path, engine)
#   2. the fast preset's cross-entropy model on CIFAR-10 (resnet9, 24 epochs): accuracy on the JPEG test folder and
#      seconds (target >= 92 % in <= 60 s)
#   3. the five-objective CIFAR-10 table (resnet9, fast recipe, T and lambda selected in the tuning split, oracle
#      beside it, 10 seeds) from a cold cache, its wall time (target <= 10 minutes)
#   4. training throughput (images/s) per network, eager, and resnet9 compiled
#   5. the engine (logits, eps pass) and the Explore views at 50,000 x 1000 on the GPU
# Prepare on the development machine first: bash bench/gpu_bundle.sh (data and the plotly wheel into .gpu/), then
# with the device tool: run(command="bash bench/gpu_check.sh", carry=[".gpu"], timeout_s=600).
# `bash bench/gpu_check.sh table` (or tests, cifar, throughput, engine, scale) runs the parts named, each with 500 s.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check_out}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
PY="${PYTHON:-python3}"
BEGAN=$(date +%s)
ONLY="$*"

part() {  # part NAME SECONDS COMMAND...: run COMMAND for at most SECONDS, say how it ended
  local name=$1 budget=$2
  shift 2
  if [ -n "$ONLY" ]; then
    case " $ONLY " in *" $name "*) budget=500 ;; *) return 0 ;; esac
  fi
  echo
  echo "=== $name (at most ${budget} s; $(( $(date +%s) - BEGAN )) s into the check)"
  local t0=$SECONDS
  timeout --kill-after=10 "$budget" "$@"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FIGURE $name: did not finish within $budget s"
  elif [ $rc -ne 0 ]; then
    echo "FIGURE $name: failed (exit $rc) after $(( SECONDS - t0 )) s"
  else
    echo "FIGURE $name: done in $(( SECONDS - t0 )) s"
  fi
}

GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
echo "FIGURE machine: ${GPU:-no GPU found}; $(nproc) CPU cores; $($PY -c 'import torch, sys; print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")')"

export PYTHONUNBUFFERED=1
if ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/relu_site .gpu/wheels/*.whl \
    && export PYTHONPATH="/tmp/relu_site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export RELU_STUDIO_DATA=/tmp/relu_data
if [ ! -d "$RELU_STUDIO_DATA/cifar10/train_jpeg_q75" ]; then
  mkdir -p "$RELU_STUDIO_DATA" && tar -xzf .gpu/data.tar.gz -C "$RELU_STUDIO_DATA" \
    || echo "FIGURE data: .gpu/data.tar.gz missing or broken (run bash bench/gpu_bundle.sh and carry .gpu)"
fi
fresh_cache() { mktemp -d /tmp/relu_cache.XXXXXX; }

part tests 60 env RELU_STUDIO_CACHE="$(fresh_cache)" $PY -m pytest -q -p no:cacheprovider -rs \
  tests/test_training_cuda.py tests/test_slider_device.py tests/test_engine.py -k "cuda or gpu"

part cifar 95 env RELU_STUDIO_CACHE="$(fresh_cache)" \
  $PY bench/bench_cifar.py --model resnet9 --recipe fast --device cuda --json "$OUT/cifar_fast.json"

part table 215 env RELU_STUDIO_CACHE="$(fresh_cache)" \
  $PY -m relu_core study objectives --dataset cifar10 --model resnet9 --recipe fast --device cuda --seeds 10 \
  --out "$OUT/objectives"
if [ -f "$OUT/objectives/result.json" ]; then
  $PY - "$OUT/objectives/result.json" <<'PYEOF'
import json, sys

def number(value):
    return float("nan") if value is None else value

result = json.load(open(sys.argv[1]))
print(f"FIGURE table answer: {result['answer']}")
for name, row in result["objectives"].items():
    diff = row["detectors"]["relu"].get("minus_doctor", {}).get("fpr95", {})
    oracle = row.get("oracle", {}).get("detectors", {}).get("relu", {}).get("minus_doctor", {}).get("fpr95", {})
    print(
        f"FIGURE table {name}: accuracy {row['accuracy']:.2%}; Rel-U − Doctor FPR95 {number(diff.get('mean')):+.4f} "
        f"[{number(diff.get('ci_low')):+.4f}, {number(diff.get('ci_high')):+.4f}]; "
        f"oracle {number(oracle.get('mean')):+.4f} [{number(oracle.get('ci_low')):+.4f}, "
        f"{number(oracle.get('ci_high')):+.4f}]"
    )
PYEOF
fi

part throughput 45 $PY bench/bench_train_throughput.py --device cuda --images 12800 \
  --models resnet9:fast,resnet34_cifar:paper,densenet121_cifar:paper
part compiled 35 $PY bench/bench_train_throughput.py --device cuda --images 12800 --compile --models resnet9:fast

part engine 30 env RELU_STUDIO_CACHE="$(fresh_cache)" \
  $PY bench/bench_engine.py --device cuda --model resnet34_cifar --n-images 50000 --eps-images 5000
part scale 35 env RELU_STUDIO_CACHE="$(fresh_cache)" $PY bench/bench_scale.py 50000 1000 1 --device cuda

echo
echo "=== $(( $(date +%s) - BEGAN )) s in all"
grep -ao 'FIGURE.*' "$OUT/gpu_check.log" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
