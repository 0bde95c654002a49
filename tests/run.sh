#!/usr/bin/env bash
# The test command: set up .venv (dev tools, and what the tests need for real: Ray, NCCL/CUDA wheels)
# then run ruff and the whole pytest suite. Usage: bash tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py="${PYTHON:-python3}"
stamp=.venv/.relaxrepro-stamp
want="$(cat pyproject.toml $(ls tests/requirements*.txt 2>/dev/null) | sha256sum | cut -c1-16)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "tests/run.sh: setting up .venv" >&2
  "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  for req in tests/requirements*.txt; do
    [ -f "$req" ] && .venv/bin/python -m pip install -q -r "$req"
  done
  echo "$want" > "$stamp"
fi
# .venv-cuda: a separate "training interpreter" with the real NCCL and CUDA runtime wheels (about
# 500 MB installed, 15 s with a warm pip cache); pip is borrowed from .venv, none installed in it.
cstamp=.venv-cuda/.relaxrepro-stamp
cwant="$(sha256sum < tests/cuda-venv.txt | cut -c1-16)"
if [ ! -x .venv-cuda/bin/python ] || [ "$(cat "$cstamp" 2>/dev/null)" != "$cwant" ]; then
  echo "tests/run.sh: setting up .venv-cuda" >&2
  rm -rf .venv-cuda
  "$py" -m venv --without-pip .venv-cuda
  .venv/bin/python -m pip --python .venv-cuda/bin/python install -q --no-deps -r tests/cuda-venv.txt
  echo "$cwant" > "$cstamp"
fi
# .wheelhouse: the small pure-Python wheels tests/commands/test_env.py installs with --no-index (it skips,
# saying so, without them): downloaded once, again only when tests/env-export-wheels.txt changes.
wstamp=.wheelhouse/.relaxrepro-stamp
wwant="$(sha256sum < tests/env-export-wheels.txt | cut -c1-16)"
if [ "$(cat "$wstamp" 2>/dev/null)" != "$wwant" ]; then
  echo "tests/run.sh: downloading .wheelhouse" >&2
  if .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .wheelhouse -r tests/env-export-wheels.txt; then
    echo "$wwant" > "$wstamp"
  else
    echo "tests/run.sh: .wheelhouse not downloaded; the env export round trip skips" >&2
  fi
fi
# Headless Chromium for the report's browser tests (they skip, saying how to get it, where it cannot be had).
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "tests/run.sh: installing chromium" >&2
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 || true
    apt-get install -y -q chromium >/dev/null || echo "tests/run.sh: chromium not installed; browser tests skip" >&2; }
fi
# Debian's slurm-wlm and munge for the tests' one-node SLURM cluster (tests/helpers/slurm.py; its tests skip,
# saying why, where they cannot be had): about 12 s from the package cache.
have_slurm() { for t in munged slurmctld slurmd sbatch srun; do PATH="$PATH:/usr/sbin:/sbin" command -v "$t" >/dev/null || return 1; done; }
if ! have_slurm; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tests/run.sh: installing slurm-wlm and munge" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || {
      apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 ||
        echo "tests/run.sh: slurm-wlm not installed (apt-get failed); the SLURM tests skip" >&2; }
  else
    echo "tests/run.sh: slurm-wlm not installed (needs root and apt-get); the SLURM tests skip" >&2
  fi
fi
export RAY_USAGE_STATS_ENABLED=0
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
