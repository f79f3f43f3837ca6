"""Write course_utils/data/lab_cells.json: the nbgrader cells each released lab holds (make release).

    python -m course_staff.edition.lab_cells        # after nbgrader generate_assignment

Students' pre-submission check (course_utils/notebook_problems.py) compares a notebook with it to
name a deleted or pasted cell. Per lab, in notebook order: each cell's grade_id, its kind (answer,
check, written answer, read-only) and its type; never a cell's text, so nothing of a solution or
of a hidden test.
"""

import json
import sys
from pathlib import Path

import nbformat

from course_staff.course import REPO, labs
from course_utils.notebook_problems import LAB_CELLS, lab_cells_of


def build(root=REPO):
    """{lab: [cell entries]} of every release/<lab>/<lab>.ipynb under ``root``."""
    release = Path(root) / "release"
    return {lab: lab_cells_of(nbformat.read(str(release / lab / f"{lab}.ipynb"), as_version=4))
            for lab in labs(root) if (release / lab / f"{lab}.ipynb").exists()}


def main():
    built = build()
    LAB_CELLS.write_text("{\n" + ",\n".join(
        f'{json.dumps(lab)}: [\n' + ",\n".join(f"  {json.dumps(c)}" for c in cells) + "]"
        for lab, cells in built.items()) + "\n}\n")
    print(f"{LAB_CELLS.relative_to(REPO)}: the cells of {', '.join(built)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
