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
