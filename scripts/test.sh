#!/usr/bin/env bash
# Set up .venv, then run every check and every test tier except soak (exactly what CI runs).
# Extra arguments go to pytest, e.g. scripts/test.sh -k recovery
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
# One command per line: under set -e, a failure on the left of && would not stop the script.
echo "== ruff";        ruff check src tests benchmarks
ruff format --check src tests benchmarks
echo "== mypy";        mypy
echo "== import-linter"; lint-imports
echo "== pytest (every tier but soak)"
python -m pytest -m "not soak" "$@"
