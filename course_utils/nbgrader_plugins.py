"""nbgrader preprocessors of the course (named in nbgrader_config.py).

ClearWidgetState  -- generate_assignment: drop saved ipywidgets state, so no image of a solution
                     run can reach release/.
HideTestCode      -- generate_feedback: a failed check shows its error type and message, never the
                     traceback, which would quote the lines of a hidden test.
SurviveKernelDeath -- autograde: a cell that kills the kernel (os._exit, a crash, out of memory)
                     scores like a failing cell instead of leaving the whole notebook ungraded.
"""

import copy

from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer

KERNEL_DIED = ("KernelDied", "the kernel died while running this cell (os._exit, a crash or out of "
               "memory); it was skipped, the kernel restarted and the cells above it were run again")


class ClearWidgetState(NbGraderPreprocessor):
    """Remove notebook-level widget state and widget views from every output."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
            for output in cell.get("outputs", []):
                output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        return nb, resources


class HideTestCode(NbGraderPreprocessor):
    """Replace each error's traceback by the one line 'ErrorType: message'."""

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class SurviveKernelDeath(Execute):
    """nbgrader's Execute (configured as ``c.Execute``), except that when a cell kills the kernel,
    that cell gets an error output, a new kernel replays the code cells above it (skipping cells
    that killed the kernel or timed out) and execution goes on with the next cell. Without this,
    one ``os._exit`` leaves a student's whole notebook ungraded."""

    max_kernel_deaths = Integer(3, help="Give up on a notebook after this many kernel deaths").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._skip_on_replay = set()
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            if len(self._skip_on_replay) >= self.max_kernel_deaths:
                raise
            self.log.warning("The kernel died in cell %d; restarting it and replaying the cells above", index)
            ename, evalue = KERNEL_DIED
            cell.outputs = [NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                         traceback=[f"{ename}: {evalue}"])]
            self._skip_on_replay.add(index)
            self._restart_and_replay(index)
            return cell, self.resources

    def _restart_and_replay(self, upto):
        self._cleanup_kernel()
        self.km = self.create_kernel_manager()
        self.start_new_kernel()
        self.start_new_kernel_client()
        for i, cell in enumerate(self.nb.cells[:upto]):
            timed_out = any(o.get("ename") in ("CellTimeoutError", "KeyboardInterrupt")
                            for o in cell.get("outputs", []))
            if cell.cell_type == "code" and i not in self._skip_on_replay and not timed_out:
                try:
                    self.execute_cell(copy.deepcopy(cell), i, store_history=False)
                except DeadKernelError:      # died again on replay: skip that cell from now on
                    self._skip_on_replay.add(i)
                    if len(self._skip_on_replay) >= self.max_kernel_deaths:
                        raise
                    return self._restart_and_replay(upto)
