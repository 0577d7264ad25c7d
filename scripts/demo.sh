#!/usr/bin/env bash
# Quickstart job: creates .venv if needed, builds digits, trains ViTs with embed_1d,
# sine_2d and fourier, prints the comparison table and writes the plot.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  .venv/bin/pip install -q -e . --no-deps
fi
JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}" .venv/bin/python -m experiments.digits_demo.run "$@"
