#!/usr/bin/env bash
# The prepared GPU check of issue 40 (one H100, about 6 minutes): run it as one `device` call
# from the repository root, with lfpe's train extras carried as wheels in .whl/ (recipe:
# benchmarks/README.md, "GPU figures"). Everything it prints goes to $OUT/gpu_check.log.
#   1. which kernel ViT-B/16's attention call takes (197 tokens, bf16, batch 256): as the
#      models call it, padded to 64 with the true lengths, and XLA's; fwd + bwd time;
#   2. the ViT-B/16 train step with `attention=auto` against `explicit` (same call);
#   3. timm's step with torch.compile, the PyTorch peer, in the same call.
set -uo pipefail
log="${OUT:-/tmp}/gpu_check.log"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import jax, flax; print('jax', jax.__version__, 'flax', flax.__version__)"
  timeout 150 python3 -m benchmarks.attention_kernel --pad 0,64 --steps 20
  timeout 240 python3 -m benchmarks.train_step --variants B/16 --posembs embed_1d --batch 256 \
    --dtype bfloat16 --attention explicit,auto --steps 10 --no-pipeline
  timeout 150 python3 -m benchmarks.timm_step --steps 10 --modes compile
} 2>&1 | tee "$log"
