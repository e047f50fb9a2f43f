#!/usr/bin/env bash
# Set up (virtualenv, packages) and run the whole test suite, soak tests excepted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SLUICE_APT_NEEDS="kcat:kcat /usr/share/java/zookeeper.jar:zookeeper java:openjdk-17-jre-headless chromium:chromium chromedriver:chromium-driver" \
    bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -m "not slow" --durations=20 "$@"
