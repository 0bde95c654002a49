"""Fake credentials in the real formats of the project's SECRETS.md brief, built at run time.

Every value is assembled by concatenation from a seeded generator so that this repository never
carries a string that looks like a live secret (scanners run over it too).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

ALNUM = string.ascii_letters + string.digits
LETTERS = string.ascii_letters
WORD = ALNUM + "_"
DASHWORD = ALNUM + "_-"
HEX = "0123456789abcdef"
B32 = string.ascii_uppercase + "234567"


def _rand(seed: str, alphabet: str, n: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(seed: str, n: int) -> str:
    return _rand(seed, ALNUM + "-_", n)


def _b64json(obj: Dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def fakes() -> Dict[str, str]:
    """One fake value per shape, named after the kind of credential."""
    claims = {"sub": _rand("sub", ALNUM, 12), "iat": 1700000000}
    jwt = _b64json({"alg": "HS256", "typ": "JWT"}) + "." + _b64json(claims) + "." + _b64url("js", 43)
    return {
        "github-classic": "gh" + "p_" + _rand("ghp", ALNUM, 36),
        "github-oauth": "gh" + "o_" + _rand("gho", ALNUM, 36),
        "github-user-to-server": "gh" + "u_" + _rand("ghu", ALNUM, 36),
        "github-app": "gh" + "s_" + _rand("ghs", ALNUM, 36),
        "github-refresh": "gh" + "r_" + _rand("ghr", ALNUM, 36),
        "github-fine-grained": "github" + "_pat_" + _rand("fg1", ALNUM, 22) + "_" + _rand("fg2", ALNUM, 59),
        "gitlab-pat": "glp" + "at-" + _rand("gl", DASHWORD, 20),
        "gitlab-deploy": "gld" + "t-" + _rand("gld", DASHWORD, 24),
        "gitlab-runner": "glr" + "t-" + _rand("glr", DASHWORD, 24),
        "huggingface": "h" + "f_" + _rand("hf", LETTERS, 34),
        "huggingface-org": "api" + "_org_" + _rand("hforg", LETTERS, 34),
        "openai-project": "sk-" + "proj-" + _rand("op1", ALNUM, 58) + "T3Blbk" + "FJ" + _rand("op2", ALNUM, 58),
        "openai-service": "sk-" + "svcacct-" + _rand("os1", ALNUM, 74) + "T3Blbk" + "FJ" + _rand("os2", ALNUM, 74),
        "openai-legacy": "sk-" + _rand("ol1", ALNUM, 20) + "T3Blbk" + "FJ" + _rand("ol2", ALNUM, 20),
        "anthropic": "sk-" + "ant-api03-" + _rand("an", DASHWORD, 93) + "AA",
        "anthropic-admin": "sk-" + "ant-admin01-" + _rand("ana", DASHWORD, 93) + "AA",
        "aws-key-id": "AK" + "IA" + _rand("aws", B32, 16),
        "aws-session-key-id": "AS" + "IA" + _rand("asia", B32, 16),
        "google-api": "AI" + "za" + _rand("goog", DASHWORD, 35),
        "azure-client-secret": _rand("az1", ALNUM, 3) + "8" + "Q~" + _rand("az2", ALNUM, 32),
        "slack-bot": "xo" + "xb-" + _rand("sb1", string.digits, 12) + "-" + _rand("sb2", string.digits, 13) + "-"
        + _rand("sb3", ALNUM, 24),
        "slack-user": "xo" + "xp-" + _rand("su1", string.digits, 12) + "-" + _rand("su2", string.digits, 12) + "-"
        + _rand("su3", string.digits, 13) + "-" + _rand("su4", HEX, 32),
        "jwt": jwt,
        "npm": "np" + "m_" + _rand("npm", ALNUM, 36),
        "pypi": "py" + "pi-" + "AgEIcHlwaS5vcmc" + _rand("pypi", DASHWORD, 70),
        "databricks": "da" + "pi" + _rand("dapi", HEX, 32),
        "perplexity": "pp" + "lx-" + _rand("pplx", ALNUM, 48),
        "wandb-v1": "wan" + "db_v1_" + _rand("w1", ALNUM, 27) + "_" + _rand("w2", ALNUM, 49),
        "wandb-local": "loc" + "al-" + _rand("wl", HEX, 40),
        "neptune": "eyJhcGlfYWRkcmVz" + "cyI6" + _rand("nep", ALNUM, 80),
        "google-oauth-secret": "GOC" + "SPX-" + _rand("gocs", DASHWORD, 28),  # pragma: allowlist secret
        "stripe": "sk" + "_live_" + _rand("stripe", ALNUM, 24),
    }


def pem_key() -> str:
    body = "\n".join(_rand("pem%d" % i, ALNUM + "+/", 64) for i in range(6))
    return "-----BEGIN " + "RSA PRIVATE" + " KEY-----\n" + body + "\n-----END " + "RSA PRIVATE" + " KEY-----"


def secret_password() -> str:
    return "Pw" + _rand("pw", ALNUM, 14) + "!"


def password(seed: str, middle: str = "&") -> str:
    """A fake password with ``middle`` (``&``, ``#``, ``;``, a quote, a space) between two random runs, the way
    people write them (``Tr0ub4dor&3xyz``): a redaction that stops at ``middle`` leaves the second run behind."""
    return _rand(seed + "/head", ALNUM, 9) + "7" + middle + _rand(seed + "/tail", ALNUM, 7) + "x"


def hex40(seed: str) -> str:
    """40 lowercase hex: a service account's ``private_key_id``, a legacy W&B key (secrets only by name)."""
    return _rand(seed, HEX, 40)


def wandb_legacy() -> str:
    """40 lowercase hex: indistinguishable from a commit SHA, a secret only by its name."""
    return _rand("wandb-legacy", HEX, 40)


def leaked(secret: str, text: str, window: int = 8) -> List[str]:
    """Every ``window``-long piece of ``secret`` found in ``text`` (a mask keeps at most 4 characters)."""
    return [secret[i:i + window] for i in range(0, max(len(secret) - window + 1, 1)) if secret[i:i + window] in text]


def strings(obj: Any) -> Iterator[str]:
    """Every string in a JSON document, keys included."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def detect_secrets(path: Path) -> List[Dict[str, Any]]:
    """Findings of ``detect-secrets scan --all-files PATH`` (the independent second opinion)."""
    res = subprocess.run([sys.executable, "-m", "detect_secrets", "scan", "--all-files", str(path)],
                         capture_output=True, text=True, timeout=120, cwd=str(path.parent))
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)["results"]
    return [f for findings in results.values() for f in findings]


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
