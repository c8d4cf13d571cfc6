#!/usr/bin/env bash
# The Spark engine test (tests/test_spark.py) runs pyspark in local mode, which needs a Java 17+
# runtime; this installs Debian's `openjdk-17-jre-headless` when no `java` is on the PATH. It
# never downloads a JDK from anywhere else. Called by `make test` (Makefile: spark-setup).
set -euo pipefail
if command -v java >/dev/null 2>&1; then
    exit 0
fi
bash "$(dirname "$0")/../apt_install.sh" openjdk-17-jre-headless "the Spark test" \
    sh -c 'command -v java >/dev/null'
