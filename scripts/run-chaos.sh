#!/usr/bin/env bash
# The long chaos run (not part of CI, about ten minutes): `sluice chaos` with every fault
# for a minute each on a 3-broker ZooKeeper cluster, faults held 2 to 12 seconds. Extra
# options go to `sluice chaos` (--seed, --duration, --faults, --keep-data, ...); exit
# status 1 on any violation. docs/chaos.md describes the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SLUICE_APT_NEEDS="/usr/share/java/zookeeper.jar:zookeeper java:openjdk-17-jre-headless" \
    bash scripts/setup.sh
exec .venv/bin/sluice chaos --faults all --duration 60 --hold 2:12 "$@"
