"""Token shapes: the credential formats found anywhere in a string, whatever name they stand under.

The formats listed in the project's SECRETS.md brief (GitHub, GitLab, HF, OpenAI, Anthropic, AWS, Google, Azure,
Slack, JWT, npm, PyPI, Databricks, Perplexity, W&B v1, PEM private keys).
"""

from __future__ import annotations

import re

from ...std.lazy_re import LazyPattern

SHAPES = [
    r"gh[pousr]_[A-Za-z0-9]{30,255}",
    r"github_pat_[A-Za-z0-9_]{60,255}",
    r"gl(?:pat|dt|rt|cbt|ft|soat|ptt)-[\w-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"api_org_[A-Za-z0-9]{30,}",
    r"sk-ant-(?:api|admin)\d\d-[\w-]{80,}",
    r"sk-(?:proj|svcacct|admin)-[\w-]{40,}",
    r"sk-[\w-]{0,80}T3BlbkFJ[\w-]{10,}",
    r"sk-[A-Za-z0-9]{32,}",
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}",
    r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
    r"AIza[\w-]{35}",
    r"GOCSPX-[\w-]{20,}",
    r"ya29\.[\w-]{20,}",
    r"1//0[\w-]{30,}",
    r"[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}",
    r"xox[abposr]-[0-9A-Za-z-]{10,}",
    r"eyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]*",
    r"eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/=_-]+",
    r"npm_[A-Za-z0-9]{36}",
    r"pypi-AgEIcHlwaS5vcmc[\w-]{50,}",
    r"dapi[0-9a-f]{32}(?:-\d)?",
    r"pplx-[A-Za-z0-9]{48}",
    r"wandb_v1_[A-Za-z0-9_]{60,}",
    r"local-[0-9a-f]{40,}",
]
# The rules the Redactor guards by a substring test (``PRIVATE KEY``, ``hooks.slack.com``; in urls.py ``://``
# with ``@``, ``uthorization``) rarely run: they compile on first use (~2 ms off every start). The hot one is
# compiled here.
SHAPE_RE = re.compile(r"(?<![A-Za-z0-9])(?:%s)" % "|".join(SHAPES))
SLACK_HOOK_RE = LazyPattern(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]{8,}")
PEM_RE = LazyPattern(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)")
