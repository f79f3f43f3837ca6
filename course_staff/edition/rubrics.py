"""The written questions of a lab with their model answers and rubrics, for the TAs who grade them.

    python -m course_staff.edition.rubrics lab12            # print them, in notebook order
    python -m course_staff.edition.rubrics lab12 > lab12_rubric.md

They live in the instructor notebook only: each written answer cell of source/<lab>/<lab>.ipynb
(a markdown cell that nbgrader grades by hand) holds a **Model answer.** and a **Rubric (N points).**
whose bullets ("- 0.5 point: ...") add up to the cell's points. `make release` replaces the whole
cell by "YOUR ANSWER HERE", so students never see either.
"""

import re
import sys
from dataclasses import dataclass

import nbformat

from course_staff.course import LABS, REPO, is_written_answer, source_notebook
RUBRIC = re.compile(r"^\*\*Rubric \((\d+(?:\.\d+)?) points?\)\.\*\*\s*$", re.M)
ITEM = re.compile(r"^- (\d+(?:\.\d+)?) points?: (.+)$", re.M)


@dataclass
class Written:
    grade_id: str
    points: float
    question: str          # the locked markdown cell above the answer cell
    model_answer: str
    rubric: list           # [(points, criterion), ...]
    rubric_total: float    # as the rubric's heading states it


def written_answers(lab, root=REPO):
    """The lab's written answers, in notebook order, parsed from its source notebook."""
    nb = nbformat.read(str(source_notebook(lab, root)), as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        if not is_written_answer(cell):
            continue
        meta = cell.metadata["nbgrader"]
        text = cell.source
        heading = RUBRIC.search(text)
        if heading is None or "**Model answer.**" not in text:
            raise ValueError(f"{lab}/{meta['grade_id']}: no '**Model answer.**' or '**Rubric (N points).**'")
        model = text[:heading.start()].replace("**Model answer.**", "", 1).strip()
        items = [(float(p), what.strip()) for p, what in ITEM.findall(text[heading.end():])]
        question = nb.cells[i - 1].source if i > 0 else ""
        found.append(Written(meta["grade_id"], float(meta["points"]), question, model, items,
                             float(heading.group(1))))
    return found


def as_markdown(lab, root=REPO):
    lines = [f"# {lab}: written answers, model answers and rubrics", ""]
    for w in written_answers(lab, root):
        lines += [f"## `{w.grade_id}` ({w.points:g} points)", "", w.question, "", "**Model answer.**", "",
                  w.model_answer, "", "**Rubric.**", ""]
        lines += [f"- {p:g} point{'s' if p > 1 else ''}: {what}" for p, what in w.rubric] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    for lab in sys.argv[1:] or LABS:
        print(as_markdown(lab))
