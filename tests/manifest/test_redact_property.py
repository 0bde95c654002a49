"""Property: no planted secret survives anywhere in a document, whatever structure surrounds it."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxrepro.manifest.redact import Redactor, redact_document
from tests.helpers.redact import fakes, leaked, secret_password, wandb_legacy

# RELAXREPRO_EXAMPLES=5000 for a longer hunt; the default keeps the suite fast.
EXAMPLES = int(os.environ.get("RELAXREPRO_EXAMPLES", "300"))
SHAPES = sorted(fakes().values())
BY_NAME = [wandb_legacy(), secret_password()]
SECRET_KEYS = ["WANDB_API_KEY", "HF_TOKEN", "password", "api_key", "RAY_REDIS_PASSWORD", "client_secret",
               "openai-key", "DB_PASS"]
SEPARATORS = [" ", "\n", "=", ": ", '"', "'", ",", "(", "/", "@", "\t", "|", ";", "<", "[", "{", "-", "_"]

_text = st.text(alphabet="abcxyz012 -_./:=", max_size=16)
_leaf = st.one_of(_text, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
_tree = st.recursive(_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                    st.dictionaries(_text, kids, max_size=4)), max_leaves=12)


def _red() -> Redactor:
    return Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")


@st.composite
def planted(draw):
    """A tree with one secret planted somewhere, in one of the ways users leak them."""
    tree = {"section": draw(_tree)}
    if draw(st.booleans()):
        secret = draw(st.sampled_from(SHAPES))
        pre, post = draw(_text), draw(_text)
        s1, s2 = draw(st.sampled_from(SEPARATORS)), draw(st.sampled_from(SEPARATORS))
        carrier = draw(st.sampled_from([
            pre + s1 + secret + s2 + post,
            {pre + s1 + secret: post},
            ["--notes", pre + " " + secret],
            "https://x-access-token:" + secret + "@github.com/o/r.git",
        ]))
    else:
        secret = draw(st.sampled_from(BY_NAME))
        key = draw(st.sampled_from(SECRET_KEYS))
        pre, post = draw(_text), draw(_text)
        carrier = draw(st.sampled_from([
            {key: secret},
            pre + " " + key + "=" + secret + " " + post,
            pre + "\n" + key + ": " + secret + "\n" + post,
            ["train.py", "--" + key.lower().replace("_", "-"), secret, pre],
            ["train.py", "--" + key.lower().replace("_", "-") + "=" + secret],
            json.dumps({key: secret, "x": pre}),
            "redis://:" + secret + "@cache.example.com:6379",
        ]))
    # Walk down the tree to a random container and put the carrier there.
    node = tree
    while True:
        children = [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, (dict, list))]
        if not children or draw(st.booleans()):
            break
        node = draw(st.sampled_from(children))
    if isinstance(node, dict):
        node[draw(_text) + "_k"] = carrier
    else:
        node.insert(draw(st.integers(0, len(node))), carrier)
    return secret, tree


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted())
def test_no_planted_secret_survives(case) -> None:
    secret, tree = case
    out = redact_document(tree, _red())
    text = json.dumps(out, ensure_ascii=False)
    assert not leaked(secret, text), text
    assert redact_document(out, _red()) == out


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=200))
def test_any_text_never_raises_and_is_idempotent(text: str) -> None:
    r = _red()
    once = r.text(text)
    assert r.text(once) == once
    assert "error" not in r.counts


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(alphabet="abAB019 -_./:=@\"'\n#?&[]{}<>,;*$~", max_size=80), st.sampled_from(
    [None, "password", "MASTER_ADDR", "SLURM_JOB_USER", "api_key", "dashboard_url", "note"]))
def test_structured_text_is_idempotent_under_any_key(text: str, key) -> None:
    r = _red()
    once = r.text(text, key=key)
    assert r.text(once, key=key) == once
