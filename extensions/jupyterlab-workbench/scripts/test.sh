#!/usr/bin/env bash
# Build, install and test the jupyterlab-workbench extension.
#
# Uses the active Python environment (`make test` activates .venv): installs
# the JS dependencies from yarn.lock, builds the labextension, installs the
# Python package into the environment and checks that JupyterLab lists it as
# enabled, then runs lint, jest and the Galata UI tests in Debian's Chromium.
# Idempotent; re-runs reuse node_modules and the yarn cache.
set -euo pipefail

EXT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHROMIUM="${WB_CHROMIUM:-/usr/bin/chromium}"
export WB_CHROMIUM="$CHROMIUM"

fail() {
    printf '\njupyterlab-workbench: %s\n' "$*" >&2
    exit 1
}

START=$SECONDS
step() {
    printf '\n==> [%3ds] %s\n' "$((SECONDS - START))" "$*"
}

# jlpm install, immutable once the lockfile exists so CI installs what was reviewed.
jlpm_install() {
    if [ -s yarn.lock ]; then
        jlpm install --immutable
    else
        jlpm install
    fi
}

[ -x "$CHROMIUM" ] || fail "$CHROMIUM is missing. Install it with:
    apt-get update && apt-get install -y chromium
(never 'playwright install': browser downloads do not work here)"
command -v python >/dev/null || fail "no python on PATH: activate the environment first"
command -v jlpm >/dev/null || fail "jlpm not found: activate the Python environment with jupyterlab (make test does)"
command -v node >/dev/null || fail "node not found: building the extension needs node >= 18"

cd "$EXT_DIR"

step "python build tools"
# The wheel is built without isolation so that no second jupyterlab is downloaded.
python -c 'import hatchling, hatch_jupyter_builder, hatch_nodejs_version' 2>/dev/null ||
    python -m pip install --quiet "hatchling>=1.5" "hatch-jupyter-builder>=0.5" "hatch-nodejs-version>=0.3.2"

step "jlpm install"
jlpm_install

step "jlpm build"
jlpm build

step "lint (stylelint, prettier, eslint)"
jlpm lint:check

step "pip install (prebuilt labextension into $(python -c 'import sys; print(sys.prefix)'))"
python -m pip install --quiet --no-build-isolation --no-deps --force-reinstall .

step "jupyter labextension list"
listing="$(jupyter labextension list 2>&1 | sed 's/\x1b\[[0-9;]*m//g')"
if ! grep -Eq 'jupyterlab-workbench v[0-9][^ ]* +enabled +OK' <<<"$listing"; then
    printf '%s\n' "$listing" >&2
    fail "jupyter labextension list does not show jupyterlab-workbench enabled"
fi
grep -E 'jupyterlab-workbench v' <<<"$listing"

step "jest"
jlpm jest --ci

step "ui-tests: jlpm install"
cd ui-tests
jlpm_install

step "ui-tests: galata (Chromium at $CHROMIUM)"
rm -rf test-results/screenshots
jlpm playwright test
ls test-results/screenshots/*.png

step "done"
