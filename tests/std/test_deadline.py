"""Calls in a thread with a deadline: values, exceptions, calls left behind, several under one deadline."""

from __future__ import annotations

import threading
import time

from relaxrepro.std import deadline


def test_a_call_that_returns_in_time_gives_its_value():
    got = deadline.call(lambda: 42, 5)
    assert got.done and got.ok and got.value == 42 and got.error is None
    assert got.started_at is not None and got.ended_at is not None and got.ended_at >= got.started_at


def test_a_call_that_raises_gives_the_exception_in_the_callers_thread():
    def boom():
        raise ValueError("bad capture")

    got = deadline.call(boom, 5)
    assert got.done and not got.ok and isinstance(got.error, ValueError)
    assert got.why("late") == "ValueError: bad capture"


def test_even_a_base_exception_is_reported_not_lost():
    def leave():
        raise SystemExit(3)

    got = deadline.call(leave, 5)
    assert got.done and isinstance(got.error, SystemExit)


def test_a_stuck_call_is_left_behind_at_its_limit_and_listed_as_stray():
    release = threading.Event()
    t0 = time.monotonic()
    got = deadline.call(lambda: release.wait(30) and "late", 0.2, name="relaxrepro-test-stuck")
    assert time.monotonic() - t0 < 2
    assert not got.done and got.value is None and got.why("no answer") == "no answer"
    strays = deadline.stray_threads()
    assert any(t.name == "relaxrepro-test-stuck" and t.daemon for t in strays)
    release.set()
    for t in strays:
        t.join(5)
    assert not any(t.name == "relaxrepro-test-stuck" for t in deadline.stray_threads())


def test_a_late_answer_does_not_change_the_record_handed_back():
    release = threading.Event()
    running = deadline.start(lambda: release.wait(30) and "late")
    got = running.wait(0.05)
    release.set()
    running.thread.join(5)
    assert not got.done and got.value is None
    assert running.result().value == "late"


def test_started_calls_are_waited_for_later_without_a_limit():
    running = deadline.start(lambda: time.sleep(0.1) or "v", name="relaxrepro-test-later")
    assert running.thread.name == "relaxrepro-test-later"
    assert running.wait().value == "v"


def test_several_calls_run_at_once_under_one_deadline_in_the_order_given():
    t0 = time.monotonic()
    calls = deadline.call_all([lambda: time.sleep(0.3) or 1, lambda: time.sleep(0.3) or 2, lambda: 3],
                              time.monotonic() + 5)
    assert time.monotonic() - t0 < 0.55  # in parallel, not 0.6 s
    assert [c.value for c in calls] == [1, 2, 3]


def test_past_the_deadline_each_wait_gets_only_its_grace():
    release = threading.Event()
    t0 = time.monotonic()
    calls = deadline.call_all([lambda: release.wait(30)] * 3, time.monotonic() + 0.2, grace=0.1)
    took = time.monotonic() - t0
    release.set()
    assert [c.done for c in calls] == [False, False, False]
    assert 0.25 < took < 1.0  # the deadline, then 0.1 s for each wait begun after it


def test_each_call_may_have_its_own_limit_from_its_own_start():
    release = threading.Event()
    t0 = time.monotonic()
    calls = deadline.call_all([lambda: release.wait(30), lambda: "quick"], time.monotonic() + 10, each=0.2,
                              names=["relaxrepro-test-a", "relaxrepro-test-b"])
    took = time.monotonic() - t0
    release.set()
    assert took < 1.5
    assert not calls[0].done and calls[1].value == "quick"


def test_a_call_that_ends_while_another_is_waited_for_counts_as_done():
    calls = deadline.call_all([lambda: time.sleep(0.2) or "slow", lambda: time.sleep(0.1) or "fast"],
                              time.monotonic() + 5)
    assert [c.value for c in calls] == ["slow", "fast"]
    assert calls[1].ended_at < calls[0].ended_at


def test_an_injected_clock_times_the_calls():
    ticks = iter(range(100, 200))
    got = deadline.call_all([lambda: "v"], 10 ** 6, clock=lambda: next(ticks))
    assert got[0].value == "v" and got[0].started_at >= 100 and got[0].ended_at > got[0].started_at
