#!/usr/bin/env bash
# Build jupyterlab-workbench and install it into the active Python environment.
#
# What `make lab` needs (and the first half of scripts/test.sh): JS
# dependencies from yarn.lock, the labextension build (skipped when nothing
# changed since the last one), the Python package with its prebuilt
# labextension, and a check that JupyterLab lists it as enabled.
# Set WB_EXT_BUILD=prod for a minified production build.
set -euo pipefail

EXT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

fail() {
    printf '\njupyterlab-workbench: %s\n' "$*" >&2
    exit 1
}

START=${START:-$SECONDS}
step() {
    printf '\n==> [%3ds] %s\n' "$((SECONDS - START))" "$*"
}

command -v python >/dev/null || fail "no python on PATH: activate the environment first"
command -v jlpm >/dev/null || fail "jlpm not found: activate the Python environment with jupyterlab (make lab does)"
command -v node >/dev/null || fail "node not found: building the extension needs node >= 18"

cd "$EXT_DIR"

step "python build tools"
# The wheel is built without isolation so that no second jupyterlab is downloaded.
python -c 'import hatchling, hatch_jupyter_builder, hatch_nodejs_version' 2>/dev/null ||
    python -m pip install --quiet "hatchling>=1.5" "hatch-jupyter-builder>=0.5" "hatch-nodejs-version>=0.3.2"

step "jlpm install"
if [ -s yarn.lock ]; then
    jlpm install --immutable
else
    jlpm install
fi

STAMP=jupyterlab_workbench/labextension/package.json
if [ "${WB_EXT_BUILD:-dev}" = prod ]; then
    step "jlpm build:prod"
    jlpm build:prod
elif [ -f "$STAMP" ] && [ -z "$(find src style package.json tsconfig.json yarn.lock -newer "$STAMP" -print -quit)" ]; then
    step "jlpm build: up to date"
else
    step "jlpm build"
    jlpm build
fi

step "pip install (prebuilt labextension into $(python -c 'import sys; print(sys.prefix)'))"
python -m pip install --quiet --no-build-isolation --no-deps --force-reinstall .

step "jupyter labextension list"
listing="$(jupyter labextension list 2>&1 | sed 's/\x1b\[[0-9;]*m//g')"
if ! grep -Eq 'jupyterlab-workbench v[0-9][^ ]* +enabled +OK' <<<"$listing"; then
    printf '%s\n' "$listing" >&2
    fail "jupyter labextension list does not show jupyterlab-workbench enabled"
fi
grep -E 'jupyterlab-workbench v' <<<"$listing"
