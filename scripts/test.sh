#!/usr/bin/env bash
# The test suite (README: "Run the tests"). Uses .venv if it exists and no environment is active.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -d .venv ] || { python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt && .venv/bin/pip install -q -e . --no-deps; }
  . .venv/bin/activate
fi
export JAX_PLATFORMS=cpu
python -m pytest -q -n 2 "$@"
