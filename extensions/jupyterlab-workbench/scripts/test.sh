#!/usr/bin/env bash
# Build, install and test the jupyterlab-workbench extension: what `make test` runs.
#
# Uses the active Python environment (`make test` activates .venv): runs
# scripts/install.sh (build, pip install, check that JupyterLab lists the
# extension as enabled), then lint, jest, and the Galata UI tests in Debian's
# Chromium. Idempotent; re-runs reuse node_modules, the yarn cache and an
# up-to-date build. Screenshots land in ui-tests/test-results/screenshots/.
set -euo pipefail

EXT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHROMIUM="${WB_CHROMIUM:-/usr/bin/chromium}"
export WB_CHROMIUM="$CHROMIUM"

fail() {
    printf '\njupyterlab-workbench: %s\n' "$*" >&2
    exit 1
}

export START=$SECONDS
step() {
    printf '\n==> [%3ds] %s\n' "$((SECONDS - START))" "$*"
}

# Check the browser first: no point building for a run that cannot finish.
[ -x "$CHROMIUM" ] || fail "$CHROMIUM is missing. Install it with:
    apt-get update && apt-get install -y chromium
(never 'playwright install': browser downloads do not work here)"

bash "$EXT_DIR/scripts/install.sh"

cd "$EXT_DIR"

step "lint (stylelint, prettier, eslint)"
jlpm lint:check

step "jest"
jlpm jest --ci

step "ui-tests: jlpm install"
cd ui-tests
if [ -s yarn.lock ]; then
    jlpm install --immutable
else
    jlpm install
fi

step "ui-tests: galata (Chromium at $CHROMIUM)"
rm -rf test-results/screenshots
jlpm playwright test
ls test-results/screenshots/*.png

step "done"
