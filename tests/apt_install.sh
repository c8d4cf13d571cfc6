#!/usr/bin/env bash
# Install one Debian package for a test's set-up (tests/browser/setup.sh, tests/spark/setup.sh),
# with sudo when not root, then check it took: `bash tests/apt_install.sh PACKAGE WHY CHECK...`
# runs the command CHECK... afterwards. Never downloads anything but Debian's package.
set -euo pipefail
package="$1"
why="$2"
shift 2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "installing Debian's $package for $why" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null
"$@"
