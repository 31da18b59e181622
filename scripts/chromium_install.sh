#!/usr/bin/env bash
# Make headless Chromium available for the browser test (tests/integration/report/test_report_in_browser.py):
# if no Chromium is on PATH (or at $CONCEPTLAB_CHROMIUM), install the Debian package `chromium` with apt-get (as
# root), then check that it starts headless. Prints the executable's path on stdout; exit code ≠ 0 with one line on
# stderr if it cannot (under CI=true the browser test then fails rather than skips).
set -euo pipefail
say() { echo "chromium_install: $*" >&2; }
die() { say "$*"; exit 1; }

find_chromium() {
    if [ -n "${CONCEPTLAB_CHROMIUM:-}" ]; then command -v "$CONCEPTLAB_CHROMIUM" && return 0; fi
    for name in chromium chromium-browser chromium-headless-shell google-chrome chrome; do
        command -v "$name" && return 0
    done
    return 1
}

if ! exe="$(find_chromium)"; then
    [ "$(id -u)" = 0 ] || die "no Chromium on PATH and not root: install the Debian package chromium"
    say "installing chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq chromium; } >"${TMPDIR:-/tmp}/chromium_apt.log" 2>&1 \
        || die "apt-get install chromium failed (see ${TMPDIR:-/tmp}/chromium_apt.log)"
    exe="$(find_chromium)" || die "chromium installed but not on PATH"
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
timeout 60 "$exe" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --no-first-run --user-data-dir="$profile" --dump-dom 'data:text/html,<p>ok</p>' 2>/dev/null | grep -q '<p>ok</p>' \
    || die "$exe does not render a page headless"
echo "$exe"
