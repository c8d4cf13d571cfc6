#!/usr/bin/env bash
# The browser test (tests/browser/test_app_browser.py) drives Debian's `chromium` package through
# Playwright's Python client; this installs that package when it is missing. It never downloads
# a browser build (no `playwright install`). Called by `make test` (Makefile: browser-setup).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "tests/browser/setup.sh: installing Debian's chromium for the browser test" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
test -x /usr/bin/chromium
