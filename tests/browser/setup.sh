#!/usr/bin/env bash
# The browser test (tests/browser/test_app_browser.py) drives Debian's `chromium` package through
# Playwright's Python client; this installs that package when it is missing. It never downloads
# a browser build (no `playwright install`). Called by `make test` (Makefile: browser-setup).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
bash "$(dirname "$0")/../apt_install.sh" chromium "the browser test" test -x /usr/bin/chromium
