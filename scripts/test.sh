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
# The Spark tests run in a process of their own: after the whole non-Spark suite in the same
# process, py4j's callback server was seen to die (a foreachBatch stream then hangs); not yet
# understood, see the issue 4 notes. Together the two runs are every tier except soak.
# Exit status 5 is "no test selected" (extra arguments such as -k can leave one run empty).
echo "== pytest (all but spark and soak)"
python -m pytest -m "not soak and not spark" "$@" || [ $? -eq 5 ]
echo "== pytest (spark)"
python -m pytest -m "spark and not soak" "$@" || [ $? -eq 5 ]
