#!/usr/bin/env bash
# Wheels that benchmarks/gpu_suite.py needs on a GPU machine without network (its image has
# Python 3.12, jax, flax, optax, orbax, torch, torchvision, timm, scipy, einops): lfpe's train
# extras and reformer-pytorch with their pure-Python needs, into .whl/ (git-ignored, about
# 11 MB: `run`'s carry=[".whl"] takes it along). There: benchmarks/gpu_call.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
platforms=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64
  manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)
for wheel in array_record==0.8.6 dm-tree==0.1.10 docstring_parser==0.18.0 \
  googleapis-common-protos==1.76.0 grain==0.2.18 immutabledict==4.3.1 ml_collections==1.1.0 \
  portpicker==1.6.0 promise==2.3 pycocotools==2.0.11 simple-parsing==0.1.9 \
  tensorboardX==2.6.5 tensorflow-datasets==4.9.10 tensorflow-metadata==1.21.0 \
  termcolor==3.3.0 toml==0.10.2 reformer-pytorch==1.4.4 axial-positional-embedding==0.3.12 \
  colt5-attention==0.11.2 hyper-connections==0.4.11 local-attention==1.11.2 \
  product-key-memory==0.3.0 torch-einops-utils==0.2.0; do
  # promise 2.3 is published as an sdist only: pip builds its (pure-Python) wheel.
  python3 -m pip download -q --no-deps --python-version 3.12 --implementation cp \
    "${platforms[@]/#/--platform=}" --only-binary=:all: -d .whl "$wheel" 2>/dev/null ||
    python3 -m pip wheel -q --no-deps -w .whl "$wheel"
done
ls .whl
