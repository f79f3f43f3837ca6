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
"""

import atexit
import copy
import os
import shutil

from nbclient import NotebookClient
from nbclient.util import run_sync
from nbgrader import utils
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteKernelspec

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
    try:
        run_sync(km.cleanup_resources)()
    finally:
        jail = getattr(km, "_jail", "")
        if jail:
            shutil.rmtree(jail, ignore_errors=True)


@atexit.register
def _discard_pending():
    """A kernel started for a notebook that then failed to sanitize (bwrap's --die-with-parent would end
    it with this process too)."""
    global _pending
    if _pending is not None:
        pending, _pending = _pending, None
        _discard(pending[1])


class StartKernelEarly(NbGraderPreprocessor):
    """Sanitize preprocessor: start the kernel Execute will run this notebook in (module docstring)."""

    def preprocess(self, nb, resources):
        global _pending
        converter = getattr(self.parent, "parent", None)        # exporter -> nbgrader's Autograde converter
        if not hasattr(converter, "_format_dest"):
            return nb, resources
        from course_staff.grading.nbgrader_plugins import SurviveKernelDeath

        info = resources["nbgrader"]
        notebook = os.path.join(converter._format_dest(info["assignment"], info["student"]),
                                f"{info['notebook']}.ipynb")   # where Execute will read it (write_single_notebook)
        folder = os.path.split(notebook)[0]
        converter.writer._makedir(folder)       # as the writer makes it next (a lab of notebooks only: not yet)
        named = NotebookNode(metadata=copy.deepcopy(nb.metadata), cells=[])
        OverwriteKernelspec(parent=self.parent).preprocess(named, resources)   # the kernel's name, as it will be
        client = SurviveKernelDeath(parent=self.parent)
        NotebookClient.__init__(client, named, None)    # as Execute.preprocess sets itself up (config applied)
        client._check_assign_resources({"metadata": {"path": folder}})
        client.km = client.create_kernel_manager()
        if _pending is not None:
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
        return nb, resources
