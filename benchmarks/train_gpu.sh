#!/usr/bin/env bash
# One GPU call for the training step's parts (combo optimizer kernels, the launch path,
# CUDA graphs for training, GEMM choices) and bf16 inference: each part checks, then
# times, and writes under OUT as it goes (a call cut short keeps what it measured; a
# --json of python -m benchmarks renders with `python -m benchmarks --render FILE`).
#
#   . benchmarks/device_env.sh && OUT=/tmp/out bash benchmarks/train_gpu.sh [parts...]
#   parts: check optimizer host graphs gemm infer timm dtype explorer
#          (default: check optimizer host graphs gemm; each part is bounded by PART_S)
#
# MODELS: the training models (default gpt2_small,resnet50: the two host-bound ones).
# INFER: the inference part's models (default zoo: the model zoo's 42; zoo1 and zoo2 are
#   its halves, for a call each; or names, comma-separated). Part timm: timm's models.
# JOBS: items compiling at once in infer/timm (they time one at a time); ITEM_S: seconds
#   per model there (default 300).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kstrain}"
mkdir -p "$OUT"
MODELS="${MODELS:-gpt2_small,resnet50}"
INFER="${INFER:-zoo}"
JOBS="${JOBS:-6}"
DTYPE_OPS="topk,kthvalue,median,nanmedian,mode,special.bessel_j0,special.bessel_j1,special.bessel_y0,special.bessel_y1,addbmm,nn.functional.relu"
PART_S="${PART_S:-540}"  # seconds per part: none outlives one device call's 10 minutes
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt" 2>&1 || true
parts=("${@:-check optimizer host graphs gemm}")
for part in ${parts[*]}; do
  case "$part" in
    # Correctness first: the training step and the compiled AdamW step on CUDA against
    # eager (combo kernels on by default), CUDA graphs' logic with its stand-ins.
    check) timeout "$PART_S" python -m pytest -q -p no:xdist tests/core/test_correctness_training.py \
             tests/core/test_combo_kernels.py tests/core/test_cuda_graph_training.py \
             tests/core/test_launch_path.py > "$OUT/check.txt" 2>&1 ;;
    # The compiled AdamW step per model: eager, Inductor, ours with and without combos
    # (max parameter difference, ms per step, CUDA kernels per step).
    optimizer) timeout "$PART_S" python -m benchmarks.optimizer --models "$MODELS" \
             --json "$OUT/optimizer.json" > "$OUT/optimizer.txt" 2>&1 ;;
    # Host time per training step: the profiler's CPU self times and cProfile's Python,
    # eager / Inductor / ours, then ours on the JIT launch path (the lean path's A/B).
    host) timeout $((PART_S / 2)) python -m benchmarks.profile --train-models "$MODELS" --host \
             --json "$OUT/host.json" > "$OUT/host.txt" 2>&1
          KERNELSCOPE_LAUNCH=jit timeout $((PART_S / 2)) python -m benchmarks.profile --train-models "$MODELS" \
             --host --no-inductor --json "$OUT/host_jit.json" > "$OUT/host_jit.txt" 2>&1 ;;
    # CUDA graphs against CUDA graphs: Inductor's reduce-overhead beside ours with
    # cuda_graphs, on the same training steps (gradients checked against eager).
    graphs) python -m benchmarks --budget-s "$PART_S" --only train --train-models "$MODELS" --reduce-overhead \
             --json "$OUT/graphs.json" --out "$OUT/graphs.md" \
             --title "training steps, CUDA graphs" > "$OUT/graphs.txt" 2>&1 ;;
    # The explorer's GEMM choice: a transformer block by default (heuristic: nothing
    # timed) and with matmul=measure, wall time of the whole job each.
    gemm) for m in heuristic measure; do
            start=$(date +%s.%N)
            timeout $((PART_S / 2)) python -m kernelscope.compiler compile samples/transformer_block.py \
              --device cuda --no-profile --options "{\"matmul\": \"$m\"}" \
              --stage scheduling > "$OUT/gemm_$m.txt" 2>&1
            python -c "import sys; print(sys.argv[1], round(float(sys.argv[3]) - float(sys.argv[2]), 2), 's')" \
              "$m" "$start" "$(date +%s.%N)" >> "$OUT/gemm_wall.txt"
          done ;;
    # The explorer's GPU latency for a new transformer block: the job's parts in a warm
    # worker's process (the compile pool, first launch, reports, the profile's parts), then
    # click-to-result through the real server (needs flask, gunicorn, gevent: carried wheels),
    # then the launch path's and the pool's tests on this GPU.
    explorer) timeout $((PART_S / 3)) python scripts/job_parts.py --device cuda --backend triton \
             --runs 3 > "$OUT/job_parts.txt" 2>&1
          timeout $((PART_S / 3)) python scripts/latency.py --runs 3 --sample transformer_block \
             --device cuda --backend triton --log "$OUT/server.log" > "$OUT/latency.txt" 2>&1
          timeout $((PART_S / 3)) python -m pytest -q -p no:xdist tests/core/test_triton_pool.py \
             tests/core/test_launch_path.py tests/core/test_kept_reports.py > "$OUT/explorer_tests.txt" 2>&1 ;;
    # bf16 inference: the model zoo's architectures (or timm's models), eager, Inductor
    # and ours interleaved (medians of rounds, with their spread), each judged against
    # eager float32 by the 3x rule; one process per model, rows in infer.json as they come.
    infer|timm) what="$INFER"; [ "$part" = timm ] && what=timm
          python -m benchmarks --budget-s "$PART_S" --only infer --infer-models "$what" \
             --jobs "$JOBS" --item-timeout "${ITEM_S:-300}" --warmup 10 --rep 40 \
             --json "$OUT/$part.json" --out "$OUT/$part.md" \
             --title "bf16 inference, $what" > "$OUT/$part.txt" 2>&1 ;;
    # The all-dtype sweep's last mismatches, fixed on the CPU: eager's Bessel polynomials,
    # addbmm rounded once, tie-aware indices, relu of NaN; the cases on CUDA, then the
    # OpInfo sweep on those ops (more samples than the full sweep's one).
    dtype) timeout $((PART_S / 3)) python tests/core/eager_formula_cases.py triton \
             --device=cuda > "$OUT/dtype_cases.txt" 2>&1
          timeout $((PART_S * 2 / 3)) python tests/opinfo/sweep.py --target cuda \
             --mode forward --dtypes f32,f16,bf16,f64 --samples 4 --jobs 6 --timeout 60 \
             --ops "$DTYPE_OPS" --output "$OUT/dtype_sweep.jsonl" --work-dir "$OUT/dtype_work" \
             --no-report > "$OUT/dtype_sweep.txt" 2>&1 ;;
    *) echo "unknown part: $part" >&2 ;;
  esac
  echo "done: $part"
done
