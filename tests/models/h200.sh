#!/usr/bin/env bash
# One GPU call for correctness: the OpInfo sweep on CUDA (in the background, capped) and the
# training / large-op / model checks of device_checks.py, a few at a time, each capped.
#   OUT=/tmp/out bash tests/models/h200.sh [part ...]
# SWEEP_OPS_FILE (a file of comma-separated OpInfo names) sweeps only those ops and merges
# them into docs/coverage/cuda.jsonl. At most 7 files land in $OUT (the device tool brings
# back 8): versions.txt, sweep.log, sweep_shards.jsonl (every finished case, also when the
# sweep hit its cap), cuda.jsonl + cuda.meta.json (if it finished), checks.jsonl, parts.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/kscorrect}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SWEEP_S="${SWEEP_S:-150}"; PART_S="${PART_S:-150}"; PAR="${PAR:-3}"
WORK=/tmp/kssweep; LOGS=/tmp/ksparts; mkdir -p "$LOGS"
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" \
  > "$OUT/versions.txt" 2>&1
if [ "${SWEEP:-1}" = 1 ]; then
  ops=(); [ -n "${SWEEP_OPS_FILE:-}" ] && ops=(--ops "$(cat "$SWEEP_OPS_FILE")")
  timeout "$SWEEP_S" python tests/opinfo/sweep.py --target cuda --dtypes "${SWEEP_DTYPES:-f32}" \
    --samples "${SWEEP_SAMPLES:-1}" --jobs "${SWEEP_JOBS:-6}" --timeout 30 --no-report \
    --work-dir "$WORK" --cache-dir /tmp/kscache-sweep "${ops[@]}" > "$OUT/sweep.log" 2>&1 &
fi
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(training cross_entropy bf16_mlp gpt2_block)
for p in "${parts[@]}"; do
  while [ "$(jobs -rp | wc -l)" -gt "$PAR" ]; do sleep 1; done
  timeout "$PART_S" python tests/models/device_checks.py "$p" --out "$OUT/checks.jsonl" \
    > "$LOGS/${p//:/_}.log" 2>&1 &
done
wait
cat "$WORK"/cuda/shard*.jsonl > "$OUT/sweep_shards.jsonl" 2>/dev/null
grep -q "^sweep cuda" "$OUT/sweep.log" 2>/dev/null && cp docs/coverage/cuda.jsonl docs/coverage/cuda.meta.json "$OUT/"
for f in "$LOGS"/*.log; do echo "=== $f"; tail -c 3000 "$f"; done > "$OUT/parts.log"
