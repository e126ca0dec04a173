"""runtime/waiting.py alone: the session's helper thread for waits, with a stand-in for
StarPU's blocking wait (an event the test sets)."""
import threading

import pytest

from starchol.runtime.waiting import TaskWaiter


class Blocking:
    """wait_tasks for the waiter: blocks until ``release()``, counting its calls."""

    def __init__(self):
        self.calls = 0
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self):
        self.calls += 1
        self.entered.set()
        assert self.gate.wait(10)

    def release(self):
        self.gate.set()


def test_one_thread_serves_every_wait_in_order():
    wait = Blocking()
    waiter = TaskWaiter(wait)
    waiter.start()
    thread = waiter._thread
    order = []
    first = waiter.submit(lambda: order.append(1))
    assert wait.entered.wait(5)
    second = waiter.submit(lambda: order.append(2))
    assert not first.done.is_set() and not first.tasks_done.is_set()
    wait.release()
    first.result()
    second.result()
    assert order == [1, 2] and wait.calls == 2
    assert first.tasks_done.is_set() and second.tasks_done.is_set()
    assert waiter._thread is thread and thread.is_alive()
    waiter.close(timeout=5)
    assert not thread.is_alive()


def test_an_error_of_the_wait_is_raised_in_the_caller():
    def failing():
        raise RuntimeError("starpu_task_wait_for_all failed")

    waiter = TaskWaiter(failing)
    after = []
    request = waiter.submit(lambda: after.append(1))
    with pytest.raises(RuntimeError, match="wait_for_all failed"):
        request.result()
    assert not request.tasks_done.is_set() and after == []
    # the helper goes on serving
    waiter.wait_tasks = lambda: None
    waiter.submit().result()
    waiter.close(timeout=5)


def test_after_close_no_wait_blocks():
    wait = Blocking()
    waiter = TaskWaiter(wait)
    waiter.close(timeout=5)
    request = waiter.submit()
    assert request.done.is_set() and request.tasks_done.is_set()
    request.result()
    assert wait.calls == 0 and waiter._thread is None
