"""sha256 of small in-memory values without importing ``hashlib``.

``hashlib`` loads OpenSSL's libcrypto and ``_blake2`` at import: 4-7 ms of every ``generate``, which
hashes only a few kilobytes (the package list, the config, GPU UUIDs). CPython's own builtin sha256
gives the same digest with nothing to load. Where it is left out of the build (some FIPS distributions),
``hashlib`` is used. Large inputs (files, patches, data trees) keep ``hashlib``: OpenSSL is several
times faster per byte.
"""

from __future__ import annotations

try:
    from _sha256 import sha256  # CPython 3.8-3.11
except ImportError:
    try:
        from _sha2 import sha256  # CPython 3.12+
    except ImportError:
        from hashlib import sha256


def sha256_hex(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return sha256(data).hexdigest()
