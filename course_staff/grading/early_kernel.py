"""The graded kernel starts while nbgrader is still sanitizing the notebook.

A sandboxed kernel takes ~0.8 s of wall time to start (bwrap, Python, ipykernel), nearly all of it in
its own process; nbgrader meanwhile sanitizes the notebook (its problems, outputs, kernelspec,
read-only cells, cell metadata), writes it and reads it back (~0.4-0.6 s). ``StartKernelEarly``,
the first sanitize preprocessor, starts the very kernel that Execute would start: the same Execute
class and configuration, kernel manager (the sandbox), kernel name (OverwriteKernelspec's, asked
on a copy of the metadata), working folder (the autograded one, whose other files are all in place
by then: nbgrader's init_assignment has copied them), arguments and environment
(NBGRADER_EXECUTION=autograde, as nbgrader sets it for Execute).
Execute (``SurviveKernelDeath``) then ``claim``s it instead of starting its own, only if every one of
those is equal at that moment; anything else is shut down and a kernel started as before.

    c.Autograde.sanitize_preprocessors = [StartKernelEarly, ...]

``StartKernelEarly`` (course_staff/grading/nbgrader_plugins.py, beside the Execute it starts for) makes the
client as Execute makes itself and calls ``start``; this module keeps the one pending kernel.
"""

import atexit
import os

from nbclient.util import run_sync
from nbgrader import utils

TAKEN = "Executing in the kernel started while sanitizing"     # Execute's log line when it claims one
_pending = None     # (launch key, kernel manager) of the one kernel started early and not yet claimed


def launch_key(client, kwargs):
    """What decides the kernel ``client`` (an nbclient NotebookClient with its ``km`` made) would start
    with ``start_kernel`` kwargs ``kwargs``: equal keys, the same kernel."""
    km = client.km
    return (type(km), km.kernel_name, (client.resources or {}).get("metadata", {}).get("path"),
            tuple(client.extra_arguments), client.ipython_hist_file, tuple(sorted(kwargs.items())),
            tuple(sorted(os.environ.items())))


def claim(client, kwargs):
    """The kernel manager started early for ``client``'s launch (its kernel running), or None: then the
    caller starts its own. A pending kernel that does not match is shut down."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return None
    key, km = pending
    if key == launch_key(client, kwargs) and km.has_kernel:
        return km
    _discard(km)
    return None


def _discard(km):
    if getattr(km, "early_client", None) is not None:
        km.early_client.stop_channels()
        km.early_client = None
    try:
        run_sync(km.shutdown_kernel)(now=True)
    except Exception:  # noqa: BLE001 -- already dead: its resources go below all the same
        pass
    run_sync(km.cleanup_resources)()    # the sandbox's folder copy too, even where the rest fails


@atexit.register
def _discard_pending():
    """A kernel started for a notebook that then failed to sanitize (bwrap's --die-with-parent would end
    it with this process too)."""
    global _pending
    if _pending is not None:
        pending, _pending = _pending, None
        _discard(pending[1])


def start(client):
    """Start the kernel of ``client`` (made as Execute makes itself, its kernel manager created) and keep it
    for ``claim``; a kernel still pending is shut down first."""
    global _pending
    _discard_pending()
    with utils.setenv(NBGRADER_EXECUTION="autograde"):     # as nbgrader runs Execute
        key = launch_key(client, {})
        run_sync(client.async_start_new_kernel)(early=True)
    # its client too: the IOPub subscription is made while the kernel starts, so the kernel's first
    # "idle" is not published before anyone listens (which costs the client a resent kernel_info,
    # sandbox.IOPUB_WAIT_S); nbclient starts the heartbeat itself, a thread that starts once
    client.km.early_client = client.km.client()
    client.km.early_client.start_channels(hb=False)
    _pending = (key, client.km)
