#!/usr/bin/env bash
# Set up .venv, then run the main job: the data pipeline end to end on local Spark (generate an
# entity topic, report it, clean it on Spark, snapshot it as Parquet, report and chart it).
# Extra arguments go to the pipeline, e.g. scripts/main.sh --keys 500000 --updates 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null; then
    echo "the main job runs on Spark, which needs Java 17 or 21 on PATH (apt-get install -y openjdk-17-jre-headless)" >&2
    exit 2
fi
source scripts/setup-env.sh
compactlog --data-dir demo-data spark pipeline --out demo-out --fresh "$@"
