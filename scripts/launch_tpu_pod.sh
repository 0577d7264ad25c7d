#!/usr/bin/env bash
# Trains one config on every host of a Cloud TPU pod slice (docs/training.md, "Several
# processes"): copies this checkout to each worker, installs the pinned stack with jax[tpu]
# once, then starts `python -m lfpe.main --config.distributed=True` on all workers at once
# (TPU VMs set no coordinator variables: jax finds the coordinator itself), logging to
# ~/lfpe.log on each worker. The workdir and data_dir must be shared by all hosts (Filestore,
# NFS or a gcsfuse mount); a re-run of the same command resumes from the newest checkpoint.
#
#   TPU_NAME=my-v5e-32 ZONE=us-west4-a bash scripts/launch_tpu_pod.sh \
#     configs/vit_b16_imagenet.py /mnt/shared/runs/vit_b16 /mnt/shared/tfds [--config.X=Y ...]
#
# Check first that the config fits the slice's memory, on this machine (requirements-aot.txt):
#   python -m benchmarks.aot_tpu --config configs/vit_b16_imagenet.py --topology v5e:4x8
set -euo pipefail
: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}"
if [ "$#" -lt 3 ]; then
  echo "usage: TPU_NAME=... ZONE=... $0 CONFIG WORKDIR DATA_DIR [--config.FIELD=VALUE ...]" >&2
  exit 2
fi
config=$1 workdir=$2 data_dir=$3
shift 3
extra=$(printf ' %q' "$@")
cd "$(dirname "$0")/.."
ssh() { gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" --worker=all --command="$1"; }
gcloud compute tpus tpu-vm scp --recurse --zone="$ZONE" --worker=all . "$TPU_NAME":~/lfpe
ssh 'cd ~/lfpe && [ -x .venv/bin/python ] || { python3 -m venv .venv &&
  .venv/bin/pip install -q -r requirements.txt "jax[tpu]==0.10.2" &&
  .venv/bin/pip install -q -e . --no-deps; }'
ssh "cd ~/lfpe && nohup .venv/bin/python -m lfpe.main --config=$config \
  --config.distributed=True --workdir=$workdir --config.data.data_dir=$data_dir$extra \
  > ~/lfpe.log 2>&1 &"
echo "started on every worker of $TPU_NAME; follow with:"
echo "  gcloud compute tpus tpu-vm ssh $TPU_NAME --zone=$ZONE --worker=0 --command='tail -f ~/lfpe.log'"
