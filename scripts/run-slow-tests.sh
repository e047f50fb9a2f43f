#!/usr/bin/env bash
# Set up and run only the slow soak tests (kept out of CI's main run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -m slow "$@"
