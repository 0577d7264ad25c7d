#!/usr/bin/env bash
# Issue 40's prepared GPU call, one command on the device machine (no network), run from
# the repository root with the wheels carried (`bash benchmarks/gpu_wheels.sh` here first):
#   run(command="bash benchmarks/gpu_call.sh", carry=[".whl"], timeout_s=590)
#   run(command="PROFILE=1 bash benchmarks/gpu_call.sh", timeout_s=200)   # then, if time is left
# It installs the carried wheels with this machine's python3, asks cuDNN which padding ViT-B/16's
# attention takes (probe.txt), then runs the suite's rows in order of importance within
# $BUDGET seconds (gpu_suite.md, suite.txt): ViT with the inputs padded as the kernel asks,
# timm + torch.compile, the two XLA flags one at a time, the two earlier paddings, and
# Learnable-Fourier. Worst case: peaks 120 s + budget 380 s (+ the kernel log when rows end
# early) + install and probe 20 s, under 590 s. PROFILE=1: the step profiler into profile.md.
set -uo pipefail
: "${OUT:?the device machine sets OUT}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if [ "${PROFILE:-0}" = 1 ]; then
  timeout 150 python3 -m benchmarks.profile_step --top 30 --hlo 10 > "$OUT/profile.md" 2>&1
  head -60 "$OUT/profile.md"
  exit
fi
python3 -c "from lfpe.nn import fused; print('cuDNN padding of ViT-B/16 (query, key):', \
fused.cudnn_padding(256, 197, 197, 12, 64, 'bfloat16', False))" 2>&1 | tail -2 | tee "$OUT/probe.txt"
python3 -m benchmarks.gpu_suite --out "$OUT" --rows 1,2,12,13,11,10,3 --budget "${BUDGET:-380}" \
  --xla-flags=--xla_gpu_enable_triton_gemm=false \
  --xla-flags=--xla_gpu_enable_cudnn_layer_norm=true 2>&1 | tee "$OUT/suite.txt"
