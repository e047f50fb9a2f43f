#!/usr/bin/env bash
# The soak run of issue 9 (not part of CI): one Sluice broker, mixed produce/consume at
# half of its measured peak for 10 minutes, latency percentiles and RSS every minute.
# Options go to `sluice bench soak` (--minutes, --fraction, --rate, --partitions).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/sluice bench soak "$@"
