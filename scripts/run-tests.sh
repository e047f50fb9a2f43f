#!/usr/bin/env bash
# Set up (virtualenv, packages) and run the whole test suite, soak tests excepted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SLUICE_APT_NEEDS="kcat:kcat /usr/share/java/zookeeper.jar:zookeeper" bash scripts/setup.sh
exec .venv/bin/python -m pytest -m "not slow" "$@"
