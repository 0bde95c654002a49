"""The redaction pass: a pure function over the finished document, applied before any write or print.

A manifest is meant to be pasted into a ticket, so every string in it (dict keys included) goes
through :class:`Redactor` just before it is written or printed. Rules, in the order they run:

- by name (names.py, assignments.py): values of keys and flags whose name says secret (``HF_TOKEN``,
  ``--wandb-key X``, ``api_key: X`` inside config text or a patch, a service account's ``private_key_id``) are
  masked whole, whatever they hold (numbers too), to the end of their word or line or their closing quote (in a
  ``.env`` file, lines below); a value continued with a backslash onto the next line, the items of a YAML list
  under such a name (``api_keys:``, ``tokens:`` then ``- X``) and ``os.environ["HF_TOKEN"] = X`` as well;
- client tools' password options (tools.py: ``curl -u user:X``, ``mysql -pX``, ``sshpass -p X``...), in text
  (lines continued with a backslash too) and in argv; any other copy of a value masked by name is masked as well;
- by shape (shapes.py): token formats listed in the project's SECRETS.md brief (GitHub, GitLab, HF, OpenAI,
  Anthropic, AWS, Google, Azure, Slack, JWT, npm, PyPI, Databricks, Perplexity, W&B v1, PEM private keys) anywhere;
- URLs and headers (urls.py): ``user:password@`` after a URL scheme (also with an empty user), token query
  parameters, ``Authorization: ...`` and bare ``Bearer ...``;
- infrastructure (addresses.py): values of address-bearing keys (``MASTER_ADDR``, ``ray_address``, ``nodelist``...)
  that are neither loopback nor a public domain, private/CGNAT/link-local IPv4 and IPv6 ULA
  addresses, ``*.internal|corp|local|lan|intranet`` names, the machine's hostname, home directories
  and the user name where it stands alone.

The machine's hostname, login and home are given to the :class:`Redactor`: this package never looks at the
machine (:mod:`relaxrepro.collect.context` gathers them). The pass is idempotent (its placeholders and masks never
match a rule again) and never raises: a string that trips an unexpected error becomes ``<redacted>``, it never
aborts the manifest.
"""

from __future__ import annotations

from .document import own_policy, redact_document
from .names import name_kind
from .placeholders import (
    HOME,
    INTERNAL_ADDRESS,
    INTERNAL_HOST,
    MASK,
    PRIVATE_KEY,
    REDACTED,
    RULES,
    USER,
    mask,
    name_mask,
)
from .redactor import Redactor, compile_patterns
from .urls import strip_credentials

__all__ = [
    "HOME", "INTERNAL_ADDRESS", "INTERNAL_HOST", "MASK", "PRIVATE_KEY", "REDACTED", "RULES", "USER", "Redactor",
    "compile_patterns", "mask", "name_kind", "name_mask", "own_policy", "redact_document", "strip_credentials",
]
