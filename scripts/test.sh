#!/usr/bin/env bash
# The test suite (README: "Tests and benchmarks"). Uses .venv if it exists and no environment is active.
# The suite runs with its own TMPDIR and must leave nothing there but pytest's own tmp_path
# folders: anything else is litter (a temp dir some code forgot) and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -d .venv ] || { python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt && .venv/bin/pip install -q -e . --no-deps; }
  . .venv/bin/activate
fi
export JAX_PLATFORMS=cpu
# XLA's persistent compilation cache, shared by the test processes and the runs they start:
# the suite compiles the same tiny programs many times over (a resumed run, the same config
# in two tests), and on 2 cores compiling is most of a tiny run's time. Kept between runs of
# the suite (.jax-cache/, git-ignored; entries are keyed by program, jax version and flags).
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$PWD/.jax-cache}"
# XLA's CPU backend at LLVM -O0: a tiny run compiles in about two thirds of the time (a
# layout --quick run: 22 s against 35 s), and the tests' steps are too small for the slower
# code to matter. Every comparison in the suite runs both sides under the same flags.
export XLA_FLAGS="${XLA_FLAGS:-} --xla_backend_optimization_level=0"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/lfpe-tests.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
status=0
TMPDIR="$scratch" python -m pytest -q -n 2 --basetemp="$scratch/pytest" "$@" || status=$?
litter=$(ls -A "$scratch" | grep -vx pytest || true)
if [ -n "$litter" ]; then
  echo "The test suite left these in the temp dir (TMPDIR=$scratch):" >&2
  echo "$litter" | sed 's/^/  /' >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
