#!/usr/bin/env bash
# Quickstart job: creates .venv if needed, then trains ViTs with embed_1d, sine_2d and fourier
# on digits over 3 seeds each (the recipe of configs/vit_digits.py, 600 steps; each seed one
# run of the trainer, as python -m lfpe.main; about 9 minutes on 2 cores, resumable), prints
# test accuracy as mean ± 95 % CI and writes experiments/digits_demo/results.{json,md},
# claims.json and the PNG.
# Arguments go to experiments/digits_demo/run.py (--seeds N, --steps 1000, --quick). Results are
# kept per XLA:CPU setting; e.g. XLA_FLAGS=--xla_cpu_max_isa=AVX2 adds the AVX2-capped one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  .venv/bin/pip install -q -e . --no-deps
fi
JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}" .venv/bin/python -m experiments.digits_demo.run "$@"
