#!/usr/bin/env bash
# Trains one config on one multi-GPU host: one process that owns every visible GPU (jax's
# usual single-host layout; the config's mesh, data=-1 by default, spans them), after checking
# that jax sees a GPU (CUDA_VISIBLE_DEVICES picks which). Uses the active virtual
# environment, else .venv (with `pip install "jax[cuda12]==0.10.2"` in it). Resumes when run
# again with the same workdir. Several hosts: docs/training.md ("GPU cluster under SLURM").
#
#   bash scripts/launch_gpu_host.sh configs/vit_b16_imagenet.py /data/runs/vit_b16 /data/tfds \
#     [--config.FIELD=VALUE ...]
set -euo pipefail
if [ "$#" -lt 3 ]; then
  echo "usage: $0 CONFIG WORKDIR DATA_DIR [--config.FIELD=VALUE ...]" >&2
  exit 2
fi
config=$1 workdir=$2 data_dir=$3
shift 3
cd "$(dirname "$0")/.."
python=python
[ -n "${VIRTUAL_ENV:-}" ] || python=.venv/bin/python
gpus=$("$python" -c 'import jax; print(sum(d.platform == "gpu" for d in jax.devices()))')
if [ "$gpus" -lt 1 ]; then
  echo "no GPU visible to jax: install jax[cuda12]==0.10.2 into this environment" >&2
  exit 1
fi
echo "training on $gpus GPUs; log: $workdir.log"
# --xla_gpu_enable_latency_hiding_scheduler overlaps the gradient all-reduce with compute.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_latency_hiding_scheduler=true"
mkdir -p "$(dirname "$workdir")"
nohup "$python" -m lfpe.main --config="$config" --workdir="$workdir" \
  --config.data.data_dir="$data_dir" "$@" > "$workdir.log" 2>&1 &
echo "started (pid $!); follow with: tail -f $workdir.log"
