#!/usr/bin/env bash
# The Spark engine test (tests/test_spark.py) runs pyspark in local mode, which needs a Java 17+
# runtime; this installs Debian's `openjdk-17-jre-headless` when no `java` is on the PATH. It
# never downloads a JDK from anywhere else. Called by `make test` (Makefile: spark-setup).
set -euo pipefail
if command -v java >/dev/null 2>&1; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "tests/spark/setup.sh: installing Debian's openjdk-17-jre-headless for the Spark test" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
command -v java >/dev/null
