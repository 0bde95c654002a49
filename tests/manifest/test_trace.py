"""The determinism trace in memory: which steps it keeps, how exactly, how small it stays, and the stop."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from relaxrepro.manifest import writer
from relaxrepro.manifest.model import Manifest
from relaxrepro.manifest.trace import Trace, exact, max_steps


def _run(tracer, steps, **scalars):
    for step in steps:
        tracer.add(step, step * 0.5, dict(scalars))
    return tracer.section()


def test_the_first_steps_then_every_kth():
    section = _run(Trace(first=5, every=10, keep=100), range(45))
    assert section["steps"] == [0, 1, 2, 3, 4, 10, 20, 30, 40]
    assert section["calls"] == 45 and section["last_step"] == 44 and section["every"] == 10
    assert section["names"] == ["loss"] and section["values"] == [[(s * 0.5).hex() for s in section["steps"]]]


def test_a_long_run_stays_bounded_by_doubling_the_stride_and_covers_its_whole_length():
    section = _run(Trace(), range(1_000_000), acc=0.123456789, lr=3e-4)
    assert len(section["steps"]) <= 50 + 50
    assert section["steps"][:50] == list(range(50))
    assert section["steps"][-1] > 900_000 and section["every"] >= 20_000
    assert all(s % section["every"] == 0 for s in section["steps"][50:])
    assert len(writer.serialize({"trace": section})) < 16_000  # a few KB of the 100 KB cap


def test_two_runs_of_the_same_length_keep_the_same_steps():
    a = _run(Trace(), range(12_345))
    b = _run(Trace(), range(12_345))
    assert a == b


def test_a_step_that_comes_again_is_a_row_of_its_own_in_the_order_given():
    # a per-epoch step counter: 0..9, 0..9, ...; the later rows are every 10th row, whatever their step
    t = Trace(first=5, every=10, keep=100)
    for call in range(45):
        t.add(call % 10, None, {"call": call})
    section = t.section()
    assert section["steps"] == [0, 1, 2, 3, 4, 0, 0, 0, 0]
    assert section["values"] == [[0, 1, 2, 3, 4, 10, 20, 30, 40]]


def test_a_long_run_with_a_per_epoch_counter_stays_bounded_and_covers_its_whole_length():
    t = Trace()
    for call in range(300_000):
        t.add(call % 100, None, {"call": call})
    section = t.section()
    calls = section["values"][0]
    assert len(calls) <= 50 + 50 and calls[:50] == list(range(50))
    assert calls[-1] > 270_000 and calls == sorted(calls)
    assert all(c % section["every"] == 0 for c in calls[50:])
    assert section["steps"] == [c % 100 for c in calls]


def test_values_are_kept_without_loss():
    assert exact(0.1) == "0x1.999999999999ap-4" and float.fromhex(exact(0.1)) == 0.1
    assert exact(-0.0) == "-0x0.0p+0" and exact(0.0) == "0x0.0p+0"
    assert exact(float("nan")) == "nan" and exact(float("-inf")) == "-inf"
    assert exact(2 ** 60 + 1) == 2 ** 60 + 1 and exact(True) == 1
    assert exact(Fraction(1, 3)) == (1 / 3).hex()  # anything float() takes
    assert exact("fast") == "'fast'" and exact(object())[:8] == "<object "


def test_values_of_torch_and_numpy_are_exact():
    torch = pytest.importorskip("torch")
    numpy = pytest.importorskip("numpy")
    assert exact(torch.tensor(0.1, dtype=torch.float32)) == float(numpy.float32(0.1)).hex()
    assert exact(numpy.int64(2 ** 62 + 1)) == 2 ** 62 + 1
    assert exact(numpy.float64(0.1)) == (0.1).hex()


def test_a_second_call_for_the_same_step_adds_to_its_row():
    t = Trace()
    t.add(0, 1.0, {})
    t.add(0, None, {"acc": 0.5})
    t.add(1, 2.0, {"acc": 0.75})
    assert t.section()["steps"] == [0, 1]
    assert t.section()["values"] == [["0x1.0000000000000p+0", "0x1.0000000000000p+1"],
                                     ["0x1.0000000000000p-1", "0x1.8000000000000p-1"]]


def test_at_most_eight_scalars_are_kept():
    t = Trace()
    t.add(0, 1.0, {"s%d" % i: i for i in range(10)})
    section = t.section()
    assert section["names"] == ["loss"] + ["s%d" % i for i in range(7)] and section["dropped_names"] == 3


def test_a_step_that_does_not_compare_is_counted_never_raised():
    t = Trace(first=0)
    t.add(None, 1.0, {})
    t.add("x", 1.0, {})
    assert t.section()["errors"] == 2 and t.section()["calls"] == 2


def test_the_stop_step_is_kept_and_reported():
    t = Trace(stop=3)
    assert [t.add(s, 1.0, {}) for s in range(3)] == [False, False, False]
    assert t.add(3, 1.0, {}) is True
    section = t.section()
    assert section["steps"] == [0, 1, 2, 3] and section["stopped_at"] == 3 and section["max_steps"] == 3


def test_the_stop_step_is_kept_past_the_first_steps_whatever_the_stride():
    t = Trace(first=2, every=10, stop=7)
    for s in range(8):
        t.add(s, 1.0, {})
    assert t.section()["steps"] == [0, 1, 7]


@pytest.mark.parametrize("raw, limit", [("5", 5), (" 12 ", 12), ("0", 0), ("", None), ("-1", None),
                                        ("1e3", None), ("five", None)])
def test_max_steps_from_the_environment(raw, limit):
    assert max_steps({"RELAXREPRO_MAX_STEPS": raw}) == limit
    assert max_steps({}) is None


def test_manifest_trace_stops_the_run_cleanly(monkeypatch):
    monkeypatch.setenv("RELAXREPRO_MAX_STEPS", "2")
    m = Manifest(run_id="x")
    assert m.should_stop(1) is False and m.should_stop(2) is True
    m.trace(0, loss=1.0)
    m.trace(1, loss=1.0)
    with pytest.raises(SystemExit) as stop:
        m.trace(2, loss=0.5)
    assert stop.value.code == 0
    assert m.tracer.section()["steps"] == [0, 1, 2]


def test_manifest_trace_without_the_variable_never_stops(monkeypatch):
    monkeypatch.delenv("RELAXREPRO_MAX_STEPS", raising=False)
    m = Manifest(run_id="x")
    for s in range(200):
        m.trace(s, loss=float(s))
    assert m.should_stop(10 ** 9) is False
    assert json.loads(json.dumps(m.tracer.section()))["calls"] == 200
