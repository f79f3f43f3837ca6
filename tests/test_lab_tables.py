"""Each lab's table (tests/lab_tables) matches its source notebook, and what students read holds
what the course promises: a hint for every task, written answers with a model answer and a rubric
in the source and neither in the release. Fast: no nbgrader, no kernel."""

import re

import nbformat
import pytest

from course_staff import harness as h
from course_staff.rubrics import written_answers
from lab_tables import table

LABS = ("lab11", "lab12")
HINT = re.compile(r"<details><summary>Hint( \d)?[^<]*</summary>")


def _cells(folder, lab):
    return nbformat.read(str(h.REPO / folder / lab / f"{lab}.ipynb"), as_version=4).cells


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


@pytest.mark.parametrize("lab", LABS)
def test_every_graded_cell_is_in_the_table_with_its_points(lab):
    graded = {_meta(c)["grade_id"]: float(_meta(c)["points"]) for c in _cells("source", lab) if _meta(c).get("grade")}
    assert table(lab).full_marks() == graded


@pytest.mark.parametrize("lab", LABS)
def test_rows_name_their_cells(lab):
    cells = {_meta(c).get("grade_id"): c for c in _cells("source", lab)}
    for row in table(lab).tasks:
        assert re.search(rf"^def {row.function}\(", cells[row.solution].source, re.M), row.name
    for row in table(lab).rows:
        assert _meta(cells[row.solution]).get("solution") and cells[row.solution].cell_type == "code"
        for gid, _ in row.checks:
            assert cells[gid].cell_type == "code" and _meta(cells[gid]).get("locked"), gid
    for q in table(lab).questions:
        assert cells[q.name].cell_type == "markdown" and _meta(cells[q.name]).get("solution"), q.name
    order = [_meta(c).get("grade_id") for c in _cells("source", lab)]
    for row in table(lab).rows:       # the solution cell comes first, then its checks in table order
        positions = [order.index(row.solution)] + [order.index(gid) for gid, _ in row.checks]
        assert positions == sorted(positions), row.name


@pytest.mark.parametrize("lab", LABS)
def test_every_task_has_three_hints_in_the_release(lab):
    cells = _cells("release", lab)
    ids = [_meta(c).get("grade_id") for c in cells]
    for row in table(lab).tasks:
        i = ids.index(row.solution)
        above = []                       # the markdown between the previous code cell and the task's
        for c in reversed(cells[:i]):
            if c.cell_type == "code":
                break
            above.append(c.source)
        text = "\n".join(reversed(above))
        hints = HINT.findall(text)
        assert len(hints) == 3, f"{lab}/{row.name}: {len(hints)} hints in the task text above it"
        assert "**Contract" in text, f"{lab}/{row.name}: the task text states no contract"


@pytest.mark.parametrize("lab", LABS)
def test_written_answers_have_a_model_answer_and_a_rubric_that_adds_up(lab):
    answers = written_answers(lab)
    assert 3 <= len(answers) <= 6
    assert 3 * sum(w.points for w in answers) >= sum(table(lab).full_marks().values()), \
        f"{lab}: the written analysis carries less than a third of the points"
    for w in answers:
        assert w.model_answer and re.search(r"Question \d", w.question), w.grade_id
        assert w.rubric_total == w.points == pytest.approx(sum(p for p, _ in w.rubric)), w.grade_id


@pytest.mark.parametrize("lab", LABS)
def test_release_holds_no_model_answer_and_no_rubric(lab):
    text = (h.REPO / "release" / lab / f"{lab}.ipynb").read_text()
    assert "Model answer" not in text and "Rubric" not in text
    release_lines = {line.strip() for c in _cells("release", lab) for line in c.source.splitlines()}
    for w in written_answers(lab):
        lines = [ln.strip() for ln in (w.model_answer + "\n" + "\n".join(x for _, x in w.rubric)).splitlines()]
        leaked = [ln for ln in lines if len(ln) >= 12 and ln in release_lines]
        assert not leaked, f"release/{lab} shows lines of {w.grade_id}'s model answer: {leaked[:3]}"
    answers = [c.source for c in _cells("release", lab) if _meta(c).get("grade") and c.cell_type == "markdown"]
    assert answers and set(answers) == {"YOUR ANSWER HERE"}
