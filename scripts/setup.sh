#!/usr/bin/env bash
# Sets up everything Sluice needs on a fresh Debian machine with Python 3.11:
# system packages (via apt, only when missing), a virtualenv in .venv and the
# project with its development dependencies, its modules compiled to bytecode. Safe
# to run again: it skips what is already done. Source it or run it; other scripts
# call it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

apt_updated=0
apt_install() {
    # apt_install PACKAGE... : install Debian packages, running `apt-get update` once.
    local sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    if [ "$apt_updated" = 0 ]; then
        log "apt-get update"
        $sudo apt-get update -qq >/dev/null
        apt_updated=1
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# System packages the test suite and the pipeline need, as "command-or-path:package"
# pairs in SLUICE_APT_NEEDS (Java 17 for Spark: "java:openjdk-17-jre-headless").
need_pkgs=()
for spec in ${SLUICE_APT_NEEDS:-}; do
    cmd=${spec%%:*}; pkg=${spec#*:}
    command -v "$cmd" >/dev/null 2>&1 || [ -e "$cmd" ] || need_pkgs+=("$pkg")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then apt_install "${need_pkgs[@]}"; fi

PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for cand in python3.11 python3.12 python3.13 python3; do
        if command -v "$cand" >/dev/null 2>&1 &&
           "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
            PY=$cand; break
        fi
    done
fi
[ -n "$PY" ] || { log "Python 3.11+ is required"; exit 1; }

if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3-venv
fi
if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PY"
    "$PY" -m venv .venv
fi

stamp_src=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.setup-stamp 2>/dev/null)" != "$stamp_src" ]; then
    log "installing Python packages into .venv"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[dev,bench]'
    echo "$stamp_src" > .venv/.setup-stamp
fi
# Bytecode for the project's own modules, as a wheel install writes it: an editable
# install does not, and where PYTHONDONTWRITEBYTECODE is set every broker the tests and
# benchmarks launch would compile them again (~70 ms of a ~180 ms start). Only missing
# or stale files are compiled.
.venv/bin/python -m compileall -q src/sluice bench >/dev/null
log "ready: $(.venv/bin/python --version)"
