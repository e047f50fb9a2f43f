#!/usr/bin/env bash
# Set up (virtualenv, packages) and run Sluice's main job.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python bench/timer.py "$@"
