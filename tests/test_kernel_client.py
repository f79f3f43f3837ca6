"""course_utils.kernel_client: a missed zmq wake-up costs one poll slice, not a cell's time limit.

The fake socket below behaves as pyzmq does when the wake-up of an asyncio poll is missed: the
message is already there, the poll sleeps until its timeout (forever without one) and then reports
the message. The plain jupyter_client channel (the control) sleeps the whole limit on it; the
course's channel returns the message after one slice.
"""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty

import pytest
import zmq
from jupyter_client.channels import AsyncZMQSocketChannel

from course_utils.kernel_client import POLL_SLICE_S, SlicedPollChannel, SteadyKernelClient, SteadyKernelManager

MESSAGE = {"parent_header": {"msg_id": "cell 7"}, "content": {"status": "ok"}}


class MissedWakeUp:
    """A socket holding ``message`` (or nothing) whose poll never wakes before its timeout."""

    def __init__(self, message):
        self.message = message

    async def poll(self, timeout_ms=None):
        if timeout_ms is None:
            await asyncio.Event().wait()                 # no timeout: sleeps until cancelled
        await asyncio.sleep(timeout_ms / 1000)
        return zmq.POLLIN if self.message else 0        # pyzmq's last look when the poll times out


def channel(cls, message=MESSAGE):
    ch = cls.__new__(cls)                                # no real socket: the fake one
    ch.socket = MissedWakeUp(message)

    async def recv():
        return ch.socket.message
    ch._recv = recv
    return ch


def elapsed(coroutine, limit=None):
    """(result, seconds) of the coroutine, run in an event loop of its own thread: an earlier test in
    this worker may have left a loop running in the main thread, where asyncio.run refuses to start."""
    t = time.monotonic()
    with ThreadPoolExecutor(1) as thread:
        result = thread.submit(asyncio.run, coroutine if limit is None else asyncio.wait_for(coroutine, limit)).result()
    return result, time.monotonic() - t


LIMIT_S = 20          # the cell's limit in these tests; a missed wake-up must cost far less


def test_a_missed_wake_up_costs_one_slice_not_the_cell_limit():
    msg, seconds = elapsed(channel(SlicedPollChannel).get_msg(timeout=LIMIT_S))
    assert msg == MESSAGE
    assert seconds < min(4 * POLL_SLICE_S, LIMIT_S / 10), \
        f"the reply came back after {seconds:.1f} s of a {LIMIT_S} s limit; one slice is {POLL_SLICE_S} s"


def test_a_missed_wake_up_without_a_limit_still_ends():
    """nbclient polls IOPub with no timeout at all: the plain channel would never return."""
    msg, seconds = elapsed(channel(SlicedPollChannel).get_msg(timeout=None), limit=LIMIT_S)
    assert msg == MESSAGE and seconds < min(4 * POLL_SLICE_S, LIMIT_S / 10)


def test_control_the_plain_channel_sleeps_the_whole_limit():
    """The fake really misses the wake-up: jupyter_client's own channel waits out its timeout."""
    msg, seconds = elapsed(channel(AsyncZMQSocketChannel).get_msg(timeout=2))
    assert msg == MESSAGE and seconds >= 2


def test_no_message_is_still_a_timeout():
    for limit in (1.2, 0):
        t = time.monotonic()
        with pytest.raises(Empty):
            elapsed(channel(SlicedPollChannel, message=None).get_msg(timeout=limit))
        assert limit <= time.monotonic() - t < limit + POLL_SLICE_S


def test_the_manager_makes_sliced_clients():
    client = SteadyKernelManager(kernel_name="python3").client()
    assert isinstance(client, SteadyKernelClient)
    for name in ("shell", "iopub", "stdin", "control"):
        assert getattr(client, f"{name}_channel_class") is SlicedPollChannel, name


def test_the_graders_use_it():
    from traitlets.config.loader import PyFileConfigLoader

    from course_staff.course import REPO

    from importlib import import_module

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    module, name = config.Execute.kernel_manager_class.rsplit(".", 1)
    assert issubclass(getattr(import_module(module), name), SteadyKernelManager)   # the sandbox's, or with SANDBOX=off itself
