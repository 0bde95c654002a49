"""Build relaxrepro.pyz reproducibly: sorted entries, fixed timestamps, normalised modes.

Usage: python tools/build_pyz.py OUT   (zipapp.sh calls this). Honours SOURCE_DATE_EPOCH.
"""

import os
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHEBANG = b"#!/usr/bin/env python3\n"
# The zip root's __main__ must parse on any Python 3 so 3.6/3.7 get one line, not a traceback.
MAIN = b"""import sys

if sys.version_info < (3, 8):
    sys.stderr.write("relaxrepro needs Python 3.8 or newer (found %d.%d.%d)\\n" % tuple(sys.version_info[:3]))
    sys.exit(2)

from relaxrepro.cli import run_main  # noqa: E402

run_main()
"""
_DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest time a zip entry can carry


def _entries():
    pkg = os.path.join(ROOT, "relaxrepro")
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name.endswith(".json"):
                full = os.path.join(dirpath, name)
                yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def build(out):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", _DEFAULT_EPOCH))
    stamp = time.gmtime(max(epoch, _DEFAULT_EPOCH))[:6]
    tmp = out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(SHEBANG)
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            def add(arcname, data):
                info = zipfile.ZipInfo(arcname, date_time=stamp)
                info.external_attr = 0o100644 << 16
                info.create_system = 3
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data, compresslevel=9)

            add("__main__.py", MAIN)
            for arcname, full in sorted(_entries()):
                with open(full, "rb") as src:
                    add(arcname, src.read())
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist", "relaxrepro.pyz")
    os.makedirs(os.path.dirname(os.path.abspath(target)) or ".", exist_ok=True)
    print(build(target))
