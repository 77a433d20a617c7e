#!/usr/bin/env bash
# Set up .venv, then run the main job: the store demo (seed example, then a generated workload).
# Extra arguments go to the demo, e.g. scripts/main.sh --records 200000
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
python -m compactlog.demo --data-dir demo-data "$@"
