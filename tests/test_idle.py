"""The workers' sleep policy (runtime/idle.py) alone: its states and events.

The policy only calls four functions of the binding; here a small recorder holds their
state (StarPU's pause count and the binding's flag), so that every event and the linger
timer are checked without StarPU. test_runtime_unit.py runs the same policy in a real
session (``test_workers_sleep_once_the_tasks_are_done``).
"""
import threading
import time

import pytest

from starchol.errors import UsageError
from starchol.runtime.idle import LINGER_S, WorkerSleep, linger_seconds


class Binding:
    """The four calls of the compiled binding the policy uses, and their state."""

    def __init__(self):
        self.paused = False
        self.pending = 0
        self.calls = []

    def idle_pause(self):
        assert not self.paused, "paused twice: StarPU counts pauses"
        self.paused = True
        self.calls.append("pause")

    def idle_resume(self):
        if self.paused:
            self.paused = False
            self.calls.append("resume")

    def idle_paused(self):
        return self.paused

    def tasks_pending(self):
        return self.pending


def asleep_within(b, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if b.paused:
            return True
        time.sleep(0.005)
    return b.paused


def test_without_linger_the_workers_sleep_when_the_tasks_are_done():
    b = Binding()
    s = WorkerSleep(b, linger=0)
    s.sleep_now()
    assert not s.awake
    s.enter(deferred=True)          # submission with the workers asleep
    assert not s.awake
    n = s.begin_wait()
    s.wake()
    assert s.awake
    s.tasks_done(n)
    assert not s.awake
    s.leave()
    assert b.calls == ["pause", "resume", "pause"]


def test_a_computation_within_the_linger_time_finds_the_workers_awake():
    b = Binding()
    s = WorkerSleep(b, linger=0.3)
    s.sleep_now()
    s.enter()
    n = s.begin_wait()
    s.tasks_done(n)
    s.leave()
    assert s.awake                   # lingering
    s.enter(deferred=True)           # the next call, back to back: no sleep, no wake
    time.sleep(0.4)
    assert s.awake                   # a computation is under way: the timer did nothing
    s.tasks_done(s.begin_wait())
    s.leave()
    assert asleep_within(b, 1.0)     # an idle session sleeps once the linger time passed
    assert b.calls == ["pause", "resume", "pause"]


def test_the_helper_of_an_older_wait_or_pending_tasks_keep_them_awake():
    b = Binding()
    s = WorkerSleep(b, linger=0)
    s.enter()
    older = s.begin_wait()
    s.begin_wait()
    s.tasks_done(older)
    assert s.awake
    b.pending = 3
    s.tasks_done(s.waits)
    assert s.awake
    s.wake_if_pending()
    b.pending = 0
    s.tasks_done(s.waits)
    assert not s.awake


def test_wake_outside_a_block_or_when_told_not_to():
    b = Binding()
    s = WorkerSleep(b, linger=0)
    s.sleep_now()
    s.wake()                         # no computation: stays asleep
    assert not s.awake
    s.enter(deferred=True)
    done = threading.Event()
    done.set()
    s.wake(unless=done)              # the tasks finished already
    assert not s.awake
    s.wake(blocking=False)
    assert s.awake


def test_disabled_never_sleeps_and_close_leaves_no_pause():
    b = Binding()
    s = WorkerSleep(b, enabled=False, linger=0)
    s.sleep_now()
    s.enter()
    s.tasks_done(s.begin_wait())
    s.leave()
    assert s.awake and b.calls == []
    s = WorkerSleep(b, linger=10)
    s.sleep_now()
    s.close()
    assert not b.paused and not s.awake   # closed: never awake as far as the policy goes
    s.sleep_now()
    assert not b.paused


def test_linger_seconds_from_the_environment():
    assert linger_seconds({}) == LINGER_S
    assert linger_seconds({"STARCHOL_AWAKE_S": "0"}) == 0
    assert linger_seconds({"STARCHOL_AWAKE_S": " 0.25 "}) == 0.25
    for bad in ("-1", "abc", "nan", "inf"):
        with pytest.raises(UsageError, match="STARCHOL_AWAKE_S must be a number of "
                                             "seconds >= 0"):
            linger_seconds({"STARCHOL_AWAKE_S": bad})
