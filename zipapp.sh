#!/usr/bin/env bash
# Build the single-file relaxrepro.pyz (default dist/relaxrepro.pyz), byte-for-byte reproducible.
# Usage: ./zipapp.sh [OUT]      honours SOURCE_DATE_EPOCH
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
exec "$py" "$here/tools/build_pyz.py" "${1:-$here/dist/relaxrepro.pyz}"
