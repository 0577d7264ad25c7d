#!/usr/bin/env bash
# Quickstart job: trains ViTs with embed_1d, sine_2d and fourier on digits over 3 seeds each
# (the recipe of configs/vit_digits.py, 600 steps; each seed one run of the trainer, as
# python -m lfpe.main; resumable: Ctrl-C, then the same command), prints test accuracy as
# mean ± 95 % CI and writes results.{json,md}, claims.json and the PNG to workdirs/digits_demo/
# (ignored by git: the committed record in experiments/digits_demo/ is never touched). Its
# time on 2 cores is in docs/testing.md. Uses the active virtual environment, else .venv
# (created if missing).
# Arguments go to experiments/digits_demo/run.py (--seeds N, --steps 1000, --quick, --out DIR).
# Results are kept per XLA:CPU setting; e.g. XLA_FLAGS=--xla_cpu_max_isa=AVX2 adds that one.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python
if [ -z "${VIRTUAL_ENV:-}" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt
    .venv/bin/pip install -q -e . --no-deps
  fi
  python=.venv/bin/python
fi
JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}" "$python" -m experiments.digits_demo.run "$@"
