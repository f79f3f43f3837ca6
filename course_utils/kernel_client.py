"""A kernel manager whose client cannot sleep through a message: every notebook the course runs
(the self-check, the graders, the tests, the benchmarks) runs in a kernel started by it.

nbclient waits for a cell's reply with one poll of the shell socket as long as the cell's time limit,
and for its outputs with an endless poll of the IOPub socket. zmq wakes an asyncio poll through an
edge-triggered file descriptor, and on a busy machine that wake-up is sometimes missed: the kernel
has replied, the reply waits in the socket, and the poll sleeps on. pyzmq looks at the socket once
more when the poll times out, finds the reply and returns it, so the cell "succeeds" after waiting
out its whole limit. Measured here: Beyond PPO's notebook under load, with a 40 s limit, took 51 s
instead of 11 in 3 of 12 runs (the kernel's reply stamped 0.2 s after the request); in `make test`
the same notebook took 312 s, its 300 s limit and its run.

What takes the wake-up, in the labs: nbclient answers every output an ``ipywidgets.Output`` captures
with a comm message on the shell socket, sent while the cell's reply is awaited on that socket. The
sliders' frames therefore no longer live in Output widgets (views.base.show_slider), so a stock client
(``jupyter nbconvert --execute``) runs every lab to the end (tests/browser/test_labs_in_browser.py); this
manager stays for any other missed wake-up.

``SteadyKernelManager`` is jupyter_client's ``AsyncKernelManager`` except that its clients' channels
poll in slices of ``POLL_SLICE_S``, each ending in that final look, so a missed wake-up costs at
most one slice (14 runs under the same load: none over 15 s, 4 wake-ups recovered). Messages,
timeouts and errors are otherwise nbclient's own.

    NotebookClient(nb, kernel_manager_class=SteadyKernelManager, ...)                      # nbclient
    c.Execute.kernel_manager_class = "course_utils.kernel_client.SteadyKernelManager"      # nbgrader
"""

import time
from queue import Empty

from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import DottedObjectName, Type

POLL_SLICE_S = 0.5      # the longest a missed wake-up can delay a message


class SlicedPollChannel(AsyncZMQSocketChannel):
    """A kernel channel whose ``get_msg(timeout)`` polls at most POLL_SLICE_S at a time."""

    async def get_msg(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = POLL_SLICE_S if left is None else min(POLL_SLICE_S, left)
            if await self.socket.poll(int(step * 1000)):
                return await self._recv()
            if left is not None and left <= step:
                raise Empty


class SteadyKernelClient(AsyncKernelClient):
    """AsyncKernelClient with SlicedPollChannel for the shell, IOPub, stdin and control sockets."""

    shell_channel_class = Type(SlicedPollChannel)
    iopub_channel_class = Type(SlicedPollChannel)
    stdin_channel_class = Type(SlicedPollChannel)
    control_channel_class = Type(SlicedPollChannel)


class SteadyKernelManager(AsyncKernelManager):
    """AsyncKernelManager whose clients are SteadyKernelClients (module docstring)."""

    client_class = DottedObjectName("course_utils.kernel_client.SteadyKernelClient")
    client_factory = Type(SteadyKernelClient)          # what ``client()`` makes (client_class alone is not read)


__all__ = ["POLL_SLICE_S", "SlicedPollChannel", "SteadyKernelClient", "SteadyKernelManager"]
