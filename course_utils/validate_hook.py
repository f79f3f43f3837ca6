"""The Assignments tab's Validate button, with the pre-submission check's file problems first.

A Jupyter server extension that stands in for nbgrader's ``validate_assignment`` one (the hub's
student servers enable this one and disable nbgrader's: course_staff/hub/__main__.py). Validate
on a notebook with a problem that ``course_utils.notebook_problems`` finds (a pasted cell, the
metadata lost, a file under another name, ...) shows those problems and their repairs instead of
nbgrader's verdict, which would be "Success! Your notebook passes all the tests." for a notebook
whose metadata is gone. Anything else is nbgrader's own validation, unchanged.
"""

from pathlib import Path

from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.validate_assignment import handlers as nbgrader_validate

from course_utils.notebook_problems import problems


def problems_result(path):
    """The Validate dialog's answer for the notebook at ``path`` when its file has problems, else None."""
    try:
        found = problems(path)
    except Exception as error:  # noqa: BLE001 -- not a notebook nbformat can read
        return {"success": False, "value": f"{Path(path).name} is not a notebook Jupyter can read "
                f"({type(error).__name__}): fetch a fresh copy of the lab and copy your answers into it."}
    if not found:
        return None
    return {"success": False, "value": f"Before you submit, fix these problems in {Path(path).name}:\n\n"
            + "\n".join(f"- {p}" for p in found)}


class ValidateWithProblems(nbgrader_validate.ValidateAssignmentHandler):
    def validate_notebook(self, path):
        root = Path(self.root_dir).resolve()
        target = (root / path).resolve()
        if target.is_relative_to(root) and target.exists():
            result = problems_result(str(target))
            if result is not None:
                return result
        return super().validate_notebook(path)


def _jupyter_server_extension_points():
    return [{"module": "course_utils.validate_hook"}]


def _load_jupyter_server_extension(server_app):
    web_app = server_app.web_app
    web_app.settings["root_dir"] = server_app.root_dir
    handlers = [(r"/assignments/validate", ValidateWithProblems),
                (r"/nbgrader_version", nbgrader_validate.NbGraderVersionHandler)]
    web_app.add_handlers(".*$", [(url_path_join(web_app.settings["base_url"], pattern), handler)
                                 for pattern, handler in handlers])
