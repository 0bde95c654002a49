"""The per-user cache of facts about files (relaxrepro/facts.py): where it lives, when it is trusted,
what invalidates an entry, and that it stays bounded. How the CUDA probe uses it: tests/test_cuda.py."""

from __future__ import annotations

import json
import os

import pytest

from relaxrepro.std import cache as facts


@pytest.mark.parametrize("env,expect", [
    ({"RELAXREPRO_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c"),
    ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/relaxrepro"),
    ({"HOME": "<tmp>"}, "<tmp>/.cache/relaxrepro"),
    ({"HOME": "<tmp>/missing"}, None),
    ({}, None),
    ({"RELAXREPRO_NO_CACHE": "1", "RELAXREPRO_CACHE_DIR": "/c"}, None),
], ids=["explicit", "xdg", "home", "missing-home", "no-home", "off"])
def test_cache_dir(tmp_path, env, expect):
    env = {k: v.replace("<tmp>", str(tmp_path)) for k, v in env.items()}
    assert facts.cache_dir(env) == (expect.replace("<tmp>", str(tmp_path)) if expect else None)


def test_a_file_key_changes_when_the_file_is_rewritten_and_follows_symlinks(tmp_path):
    f = tmp_path / "libx.so.1"
    f.write_bytes(b"one")
    link = tmp_path / "libx.so"
    link.symlink_to(f.name)
    key = facts.file_key(str(f))
    assert key is not None and key.startswith(str(f) + "|") and facts.file_key(str(link)) == key
    f.write_bytes(b"two")
    assert facts.file_key(str(f)) != key
    assert facts.file_key(str(tmp_path / "missing")) is None


def test_round_trip_and_bounded(tmp_path):
    cache = facts.Facts(str(tmp_path / "c"))
    for i in range(facts.MAX_ENTRIES + 10):
        cache.put("libversion", "k%d" % i, i)
    assert cache.save()
    again = facts.Facts(str(tmp_path / "c"))
    assert again.get("libversion", "k%d" % (facts.MAX_ENTRIES + 9)) == facts.MAX_ENTRIES + 9
    assert again.get("libversion", "k0") is None  # the oldest went first
    assert again.get("tool-output", "k20") is None  # namespaces are apart
    assert not again.save()  # nothing changed: nothing written
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "c" / facts.FILENAME).stat().st_mode & 0o777) == "0o600"
    assert sorted(os.listdir(tmp_path / "c")) == [facts.FILENAME]  # no temp file left behind


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_file_owned_by_someone_else_is_never_read(tmp_path):
    d = tmp_path / "c"
    d.mkdir(mode=0o700)
    (d / facts.FILENAME).write_text(json.dumps({"libversion|k": 1}))
    assert facts.Facts(str(d)).get("libversion", "k") == 1
    os.chown(str(d / facts.FILENAME), 65534, 65534)
    assert facts.Facts(str(d)).get("libversion", "k") is None
