#!/usr/bin/env bash
# Set up (virtualenv, packages, Java for Spark) and run Sluice's main job: the
# end-to-end pipeline demo (`sluice demo`) on an embedded broker.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SLUICE_APT_NEEDS="java:openjdk-17-jre-headless" bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/sluice demo "$@"
