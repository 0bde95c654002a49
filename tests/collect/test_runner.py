"""The probe runner: concurrency, per-probe budget, the hard deadline, crashes and clashes."""

from __future__ import annotations

import threading
import time

from relaxrepro.collect import assemble
from relaxrepro.collect.context import Context
from relaxrepro.collect.runner import Outcome, Probe, merge_into, run_probes, stray_threads
from relaxrepro.manifest.model import SCHEMA_VERSION


def _ok(section, **data):
    return lambda ctx: Outcome(data={section: data})


def test_probes_run_concurrently_and_merge_by_section():
    def slow(ctx):
        time.sleep(0.3)
        return Outcome(data={"hardware": {"a": 1}})

    ctx = Context(env={})
    t0 = time.monotonic()
    sections, coll = run_probes([Probe("p1", slow), Probe("p2", slow), Probe("p3", _ok("hardware", b=2))], ctx)
    assert time.monotonic() - t0 < 0.55  # in parallel, not 0.9 s
    assert sections == {"hardware": {"a": 1, "b": 2}}
    assert {k: v["status"] for k, v in coll.items()} == {"p1": "ok", "p2": "ok", "p3": "ok"}


def test_crashing_probe_is_failed_and_others_survive():
    def boom(ctx):
        raise ValueError("bad capture")

    sections, coll = run_probes([Probe("boom", boom), Probe("fine", _ok("runtime", mode="local"))], Context(env={}))
    assert sections == {"runtime": {"mode": "local"}}
    assert coll["boom"]["status"] == "failed"
    assert "ValueError: bad capture" in coll["boom"]["warnings"][0]


def test_stuck_probe_times_out_at_its_budget_and_is_left_behind():
    release = threading.Event()

    def stuck(ctx):
        release.wait(30)
        return Outcome(data={"code": {"x": {}}})

    ctx = Context(env={}, probe_budget_s=0.3, deadline_s=5)
    t0 = time.monotonic()
    sections, coll = run_probes([Probe("stuck", stuck), Probe("fine", _ok("runtime", mode="local"))], ctx)
    assert time.monotonic() - t0 < 2
    assert coll["stuck"]["status"] == "timeout" and "code" not in sections
    assert any(t.name == "relaxrepro-stuck" for t in stray_threads())
    release.set()


def test_hard_deadline_caps_the_whole_collection():
    ctx = Context(env={}, probe_budget_s=10, deadline_s=0.4)
    t0 = time.monotonic()
    _, coll = run_probes([Probe("s%d" % i, lambda c: time.sleep(3) or Outcome()) for i in range(3)], ctx)
    assert time.monotonic() - t0 < 1.5
    assert {v["status"] for v in coll.values()} == {"timeout"}


def test_clash_keeps_first_and_warns():
    _, coll = run_probes([Probe("a", _ok("hardware", gpu_model="A100")), Probe("b", _ok("hardware", gpu_model="H100"))],
                         Context(env={}))
    assert coll["b"]["warnings"] == ["b: hardware.gpu_model was already set by another probe; kept the first"]


def test_skipped_probe_is_recorded_as_skipped():
    _, coll = run_probes([Probe("a", _ok("hardware", x=1))], Context(env={}), skip=["a"])
    assert coll["a"] == {"status": "skipped", "seconds": 0.0, "warnings": []}


def test_merge_into_reports_nested_clash_path():
    target = {"code": {"r": {"commit": "a"}}}
    assert merge_into(target, {"code": {"r": {"commit": "b", "dirty": True}}}) == ["code.r.commit"]
    assert target == {"code": {"r": {"commit": "a", "dirty": True}}}


def test_build_has_every_section_and_probe_entries():
    ctx = Context(env={"PATH": "/nonexistent"}, argv=["python", "train.py"], argv_source="cli")
    doc = assemble.build(ctx, probes=[Probe("fine", _ok("runtime", mode="local"))], derivers=[])
    for section in ("command", "code", "config", "environment", "hardware", "runtime", "training", "collection"):
        assert isinstance(doc[section], dict)
    assert doc["runtime"] == {"mode": "local"}
    assert doc["collection"]["probes"]["fine"]["status"] == "ok"
    assert doc["schema_version"] == SCHEMA_VERSION == "1.3"
