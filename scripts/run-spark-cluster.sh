#!/usr/bin/env bash
# Set up and run the Spark standalone-cluster test: a Spark master and two workers
# started from the PySpark installation, three sluice broker processes on ZooKeeper,
# reads from each partition's leader and a broker killed -9 under a streaming copy.
# Prints its figures; takes a few minutes (most of it JVMs starting).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SLUICE_APT_NEEDS="/usr/share/java/zookeeper.jar:zookeeper java:openjdk-17-jre-headless" \
    bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -m slow -s tests/spark/test_spark_standalone_cluster.py "$@"
