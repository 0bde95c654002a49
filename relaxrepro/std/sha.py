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


JSON_INT_DIGITS = 4300
"""The most decimal digits of an int written as a JSON number: CPython 3.11+ refuses to convert a longer one
to or from text (``sys.set_int_max_str_digits``), so a manifest holding one could be neither written nor read."""

_BITS = 14_280  # 2**14280 < 10**4299: the cheap test, exact enough below the limit


def oversized_int(value: int) -> "str | None":
    """None for an int JSON can hold as a number; else the text a manifest keeps instead, one a reader
    accepts and that still tells two such ints apart: ``<int of N bits, sha256 XXXXXXXXXXXXXXXX>``."""
    bits = value.bit_length()
    if bits <= _BITS:
        return None
    raw = abs(value).to_bytes((bits + 7) // 8, "big")
    return "<%sint of %d bits, sha256 %s>" % ("-" if value < 0 else "", bits, sha256_hex(raw)[:16])
