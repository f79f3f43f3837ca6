"""nbgrader preprocessors of the course (named in nbgrader_config.py).

ClearWidgetState  -- generate_assignment: drop saved ipywidgets state, so no image of a solution
                     run can reach release/.
HideTestCode      -- generate_feedback: a failed check shows its error type and message, never the
                     traceback, which would quote the lines of a hidden test.
"""

from nbgrader.preprocessors import NbGraderPreprocessor


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
