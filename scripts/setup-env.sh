# Sourced by the other scripts: make .venv (Python 3.11+) and install compactlog with its extras.
# Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "compactlog needs Python 3.11 or newer")'
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.compactlog-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) ${COMPACTLOG_EXTRAS:=test,dev,spark}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[${COMPACTLOG_EXTRAS}]"
    echo "$want" > "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
# The broker's end-to-end tests also drive Debian's kcat (librdkafka 2.0.2, the oldest client the
# broker must serve), seed 000's kcat | gawk script and the docs' curl examples. apt-get needs root, so only then install
# what is missing; anywhere else those tests skip. Never fail the setup because of them.
missing_tools=""
for tool in kcat gawk curl; do
    command -v "$tool" >/dev/null || missing_tools="$missing_tools $tool"
done
if [ -n "$missing_tools" ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        # An if-condition is exempt from set -e: a failed install warns instead of stopping.
        if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing_tools) >/dev/null; then
            echo "setup-env: apt-get could not install$missing_tools; the kcat tests will be skipped" >&2
        fi
    else
        echo "setup-env:$missing_tools missing (installing needs root and apt-get); the kcat tests will be skipped" >&2
    fi
fi
unset missing_tools tool
# The `kafka` test tier runs the real Apache Kafka (broker, tools, Java clients) beside
# compactlog: its jars come from Maven Central through tests/kafka/pom.xml into .kafka/, once per
# version of that file (Maven's own cache in ~/.m2 keeps them across clones). Without Java or
# Maven that tier is skipped, with one line saying why; the setup never fails because of it.
kafka_pom=tests/kafka/pom.xml
kafka_stamp=.kafka/libs.sha256
if [ -f "$kafka_pom" ] && command -v java >/dev/null; then
    if ! command -v mvn >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null 2>&1 \
            || echo "setup-env: apt-get could not install maven; the kafka tests will be skipped" >&2
    fi
    kafka_want=$(sha256sum "$kafka_pom" | cut -d' ' -f1)
    if command -v mvn >/dev/null && { [ ! -f "$kafka_stamp" ] || [ "$(cat "$kafka_stamp")" != "$kafka_want" ]; }; then
        rm -rf .kafka/libs
        mkdir -p .kafka
        if mvn -q -B -f "$kafka_pom" dependency:copy-dependencies -DoutputDirectory="$PWD/.kafka/libs" >.kafka/mvn.log 2>&1; then
            echo "$kafka_want" > "$kafka_stamp"
        else
            cat .kafka/mvn.log >&2
            echo "setup-env: mvn could not fetch Kafka's jars ($kafka_pom); the kafka tests will be skipped" >&2
        fi
    fi
    unset kafka_want
fi
unset kafka_pom kafka_stamp
# Other JVM test dependencies (Spark's Kafka connector, Delta Lake, an S3-compatible server...):
# each tests/jars/<name>/pom.xml is fetched from Maven Central into .jars/<name>/, once per
# version of that file, like Kafka's jars above. A failure skips the tests that need those jars.
if command -v java >/dev/null && command -v mvn >/dev/null; then
    for jars_pom in tests/jars/*/pom.xml; do
        [ -f "$jars_pom" ] || continue
        jars_name=$(basename "$(dirname "$jars_pom")")
        jars_want=$(sha256sum "$jars_pom" | cut -d' ' -f1)
        if [ ! -f ".jars/$jars_name.sha256" ] || [ "$(cat ".jars/$jars_name.sha256")" != "$jars_want" ]; then
            rm -rf ".jars/$jars_name"
            mkdir -p .jars
            if mvn -q -B -f "$jars_pom" dependency:copy-dependencies -DoutputDirectory="$PWD/.jars/$jars_name" >".jars/$jars_name.mvn.log" 2>&1; then
                echo "$jars_want" > ".jars/$jars_name.sha256"
            else
                cat ".jars/$jars_name.mvn.log" >&2
                echo "setup-env: mvn could not fetch $jars_pom; the tests that need it will be skipped" >&2
            fi
        fi
    done
    unset jars_pom jars_name jars_want
fi
