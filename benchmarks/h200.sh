#!/usr/bin/env bash
# One H200 call: what to run, in order of importance, each part writing its JSON and
# Markdown under OUT as it finishes (a call cut short keeps what it measured).
#
#   OUT=/tmp/out bash benchmarks/h200.sh [parts...]
#   parts: all suite models overhead train trainprof latency gemm cpu
#   (all: the three GPU parts in one run, their compiles overlapping under --jobs)
#
# Environment: JOBS (items compiling at once, default 4), ITEM_TIMEOUT (s, default 240),
# CASES / MODELS (comma lists, default all), TITLE (for the sections' headings).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/ksbench}"
mkdir -p "$OUT"
JOBS="${JOBS:-4}"
T="${ITEM_TIMEOUT:-240}"
export PYTHONUNBUFFERED=1
parts=("${@:-suite overhead models}")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv > "$OUT/gpu.txt" 2>&1 || true
for part in ${parts[*]}; do
  case "$part" in
    all) python -m benchmarks --only suite,models,overhead --jobs "$JOBS" \
             --item-timeout "$T" --json "$OUT/all.json" --out "$OUT/perf.md" \
             --title "${TITLE:-suite, models, overheads}" ;;
    suite) python -m benchmarks --only suite --cases "${CASES:-}" --jobs "$JOBS" \
             --item-timeout "$T" --json "$OUT/suite.json" --out "$OUT/perf.md" \
             --title "${TITLE:-suite}" ;;
    overhead) python -m benchmarks --only overhead --jobs 1 --item-timeout "$T" \
             --json "$OUT/overhead.json" --out "$OUT/perf.md" --title "${TITLE:-overhead}" ;;
    models) python -m benchmarks --only models --models "${MODELS:-}" --jobs "$JOBS" \
             --item-timeout "$T" --json "$OUT/models.json" --out "$OUT/perf.md" \
             --title "${TITLE:-models}" ;;
    train) python -m benchmarks --only train --train-models "${TRAIN_MODELS:-}" --jobs 1 \
             --item-timeout 900 --json "$OUT/train.json" --out "$OUT/perf.md" \
             --title "${TITLE:-training steps}" ;;
    # Where a training step's time goes (Kernelscope only, host time beside the kernels)
    trainprof) python -m benchmarks.profile --train-models "${TRAIN_MODELS:-resnet50}" \
             --no-inductor --host --top 25 --json "$OUT/trainprof.json" \
             > "$OUT/trainprof.txt" 2>&1 ;;
    # The explorer through the real server (needs flask and gunicorn importable, and
    # bwrap for the deployed sandbox): a new and two repeated runs of each sample
    latency) for sample in ${SAMPLES:-transformer_block softmax}; do
             python scripts/latency.py --runs 3 --sample "$sample" --device cuda \
               --backend triton --pool 1 --options "${KS_OPTIONS:-{\}}" \
               >> "$OUT/latency.txt" 2>&1
           done ;;
    # The GEMM template: the matrix-product cases and models with the extern call only,
    # with the template forced everywhere (its values on the GPU: the check column), and
    # as chosen by measurement (the default, matmul=auto)
    gemm) for mode in extern template auto; do
             python -m benchmarks --only suite,models --cases "${CASES:-linear_gelu_linear,attention,gpt2_block}" \
               --models "${MODELS:-bert_base,gpt2_small,vit_b_16}" --jobs 1 --item-timeout "$T" \
               --ks-options "{\"matmul\": \"$mode\"}" --json "$OUT/gemm_$mode.json" \
               --out "$OUT/perf.md" --title "matmul=$mode"
           done ;;
    cpu) OMP_NUM_THREADS=2 python -m benchmarks --device cpu --jobs "$JOBS" \
             --item-timeout "$T" --json "$OUT/cpu.json" --out "$OUT/perf.md" \
             --title "${TITLE:-CPU suite, 2 threads}" ;;
    *) echo "h200.sh: unknown part $part" >&2 ;;
  esac
done
