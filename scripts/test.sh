#!/usr/bin/env bash
# Set up .venv, then run every check and every test tier except soak (exactly what CI runs).
# Extra arguments go to pytest, e.g. scripts/test.sh -k recovery
#
# scripts/test.sh --fast: the same checks (ruff, mypy, import-linter), then only the unit tests,
# without the slow, spark, broker, kafka and soak tiers: a few minutes on a 2-core machine, for
# while working. Further arguments go to pytest as above (scripts/test.sh --fast tests/records).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=false
if [ "${1-}" = "--fast" ]; then
    fast=true
    shift
fi
source scripts/setup-env.sh
# One command per line: under set -e, a failure on the left of && would not stop the script.
echo "== ruff";        ruff check src tests benchmarks
ruff format --check src tests benchmarks
echo "== mypy";        mypy
echo "== import-linter"; lint-imports
if "$fast"; then
    echo "== pytest (fast: no slow, spark, broker, kafka or soak tier)"
    python -m pytest -m "not slow and not spark and not broker and not kafka and not soak" "$@"
else
    echo "== pytest (every tier but soak)"
    python -m pytest -m "not soak" --durations=30 "$@"
fi
