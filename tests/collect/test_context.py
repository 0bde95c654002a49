"""The collection context's file reads: what a probe gets from a system file that is not one."""

from __future__ import annotations

import os
import threading

import pytest

from relaxrepro.collect.context import Context


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs, /dev/zero")
def test_read_text_gives_none_for_a_fifo_or_a_device_and_reads_a_symlinked_file(tmp_path):
    # /proc/meminfo as a FIFO (open() would wait for a writer), os-release linked to /dev/zero
    # (1 MB of NULs read as text), the real os-release of distros: a symlink to ../usr/lib/os-release.
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    os.mkfifo(str(tmp_path / "proc" / "meminfo"))
    (tmp_path / "etc" / "os-release").symlink_to("/dev/zero")
    (tmp_path / "usr" / "lib" / "os-release").write_text('ID="ubuntu"\n')
    (tmp_path / "etc" / "lsb-release").symlink_to("../usr/lib/os-release")
    ctx = Context(env={}, root=str(tmp_path))
    box = {}

    def read() -> None:
        box["got"] = [ctx.read_text(p) for p in ("/proc/meminfo", "/etc/os-release", "/etc/lsb-release")]

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)  # a hang guard: a regression fails here instead of hanging the suite
    assert not t.is_alive(), "read_text blocked on a FIFO"
    assert box["got"] == [None, None, 'ID="ubuntu"\n']


# -- the machine's facts and the redaction policy built from them ---------------------------------------------------

def test_a_context_given_the_machine_facts_redacts_exactly_those(monkeypatch):
    from relaxrepro.collect.context import Machine

    def no_lookup(*_a, **_k):
        raise AssertionError("the machine was looked at")

    monkeypatch.setattr(os, "uname", no_lookup)  # the facts are given: nothing may read the machine's own
    ctx = Context(env={}, machine=Machine(hostname="gpu-node-17.cluster", login="alice", home="/data/users/alice"))
    red = ctx.redactor
    assert red.text("alice ran on gpu-node-17 in /data/users/alice/run") == \
        "<user> ran on <internal-host> in <HOME>/run"
    assert red.text("bob ran on gpu-node-18 in /data/users/bob") == "bob ran on gpu-node-18 in /data/users/bob"
    assert ctx.machine.hostname == "gpu-node-17.cluster"


def test_the_default_machine_facts_come_from_the_environment_then_the_process(monkeypatch):
    from relaxrepro.collect import context

    monkeypatch.setattr(context, "machine_hostname", lambda: "gpu-node-17")
    facts = context.machine_facts({"USER": "alice", "LOGNAME": "al", "HOME": "/home/alice"})
    assert facts == context.Machine(hostname="gpu-node-17", login="alice", home="/home/alice")
    assert context.machine_facts({"LOGNAME": "al", "HOME": "/h"}).login == "al"
    monkeypatch.setenv("LOGNAME", "carol")
    bare = context.machine_facts({})
    assert bare.login == "carol" and bare.home == os.path.expanduser("~")
    assert Context(env={"USER": "dave", "HOME": "/home/dave"}).machine.login == "dave"


def test_the_default_policy_is_the_machine_facts_with_the_runs_options(monkeypatch):
    from relaxrepro.collect import context

    monkeypatch.setattr(context, "machine_hostname", lambda: "gpu-node-17")
    red = context.default_policy({"USER": "alice", "HOME": "/home/alice"}, extra_patterns=["proj-x"], keep_paths=True)
    assert (red.hostname, red.user, red.home, red.keep_paths) == ("gpu-node-17", "alice", "/home/alice", True)
    assert red.text("proj-x on gpu-node-17") == "<redacted> on <internal-host>"
    given = context.default_policy(machine=context.Machine(hostname="h-one", login="eve", home="/u/eve"))
    assert (given.hostname, given.user, given.home) == ("h-one", "eve", "/u/eve")
    with pytest.raises(ValueError, match="--redact-pattern"):
        context.default_policy({}, extra_patterns=["("])


def test_policy_of_a_document_is_the_one_it_was_collected_with_else_the_environments() -> None:
    from relaxrepro.collect.context import policy_of
    from relaxrepro.manifest.model import Manifest
    from relaxrepro.manifest.redact import Redactor

    own = Redactor(home="/data/users/carol", keep_paths=True)
    m = Manifest({"run_id": "r1"})
    m.redacted_by = own
    assert policy_of(m) is own
    assert policy_of(dict(m), {"HOME": "/data/users/dave"}).home == "/data/users/dave"  # a plain dict has none
    assert policy_of(Manifest({"run_id": "r1"}), {"HOME": "/data/users/dave"}).keep_paths is False
