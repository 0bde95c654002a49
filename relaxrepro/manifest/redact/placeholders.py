"""What a redaction leaves behind: the placeholders, the mask and the names of the rules that fired."""

from __future__ import annotations

from ..fields import PLACEHOLDERS

HOME = "<HOME>"
INTERNAL_HOST = "<internal-host>"
INTERNAL_ADDRESS = "<internal-address>"
USER = "<user>"
REDACTED = "<redacted>"
PRIVATE_KEY = "<private-key>"
MASK = "***"

RULES = (
    "secret-name", "secret-shape", "private-key", "url-credentials", "url-token", "authorization",
    "internal-address", "internal-host", "hostname", "home-path", "user-name", "user-pattern", "error",
)
"""Every rule name that can appear under ``collection.redactions``."""

KNOWN_PLACEHOLDERS = PLACEHOLDERS
"""Ours and Relax's (fields.PLACEHOLDERS, the one list): a value already redacted by either tool stays as it is."""


def mask(value: str) -> str:
    """``wandb_v1_...`` -> ``wand***``: at most 4 characters kept, none of a short value."""
    head = value[:4] if len(value) >= 16 else ""
    if any(c.isspace() or c == "*" for c in head):
        head = ""  # a mask must read as a mask on the next pass (idempotence)
    return head + MASK


def name_mask(value: str) -> str:
    """A value found by its name is masked whole: the name already says which key it was.

    Prefixes are kept only for shapes found in free text (``ghp_***``). Under a name, even a vendor
    prefix (``"api_key": "sk-p***"``) reads to scanners such as detect-secrets' keyword rule as a
    live assignment, and a password's first characters would tell a reader nothing but part of it.
    """
    return MASK
