"""Each lab's table (course_staff/testbed/lab_tables) matches its source notebook, and what students read holds
what the course promises: the points its text states are the metadata's (each task heading, concept
check and question, the intro table, the total), a hint for every task, written answers with a model
answer and a rubric in the source and neither in the release. Fast: no nbgrader, no kernel."""

import re

import nbformat
import pytest

from course_staff.testbed import harness as h
from course_staff.edition.rubrics import written_answers
from course_staff.testbed.lab_tables import table

LABS = h.LABS
HINT = re.compile(r"<details><summary>Hint( \d)?[^<]*</summary>")


def _cells(folder, lab):
    return nbformat.read(str(h.REPO / folder / lab / f"{lab}.ipynb"), as_version=4).cells


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


@pytest.mark.parametrize("lab", LABS)
def test_every_graded_cell_is_in_the_table_with_its_points(lab):
    graded = {_meta(c)["grade_id"]: float(_meta(c)["points"]) for c in _cells("source", lab) if _meta(c).get("grade")}
    assert list(table(lab).full_marks()) == [g for row in table(lab).rows for g, _ in row.checks] + \
        [q.name for q in table(lab).questions]
    assert table(lab).full_marks() == graded          # the table names every graded cell, and only those


def test_tables_name_cells_and_never_points():
    from course_staff.testbed.lab_tables import task
    with pytest.raises(TypeError, match="points live in the notebook"):
        task("bt_loss", 2)
    with pytest.raises(KeyError, match="no graded cell"):
        table("lab12").with_points({})


# ----------------------------------------------------------------------------- the points the text states
POINTS = r"(\d+(?:\.\d+)?) points?"
TASK_HEADING = re.compile(r"^#+ Task (\w+) — (.*)$", re.M)
CONCEPT = re.compile(r"Concept check ([A-Z]) \(" + POINTS + r"\)")
QUESTION = re.compile(r"Question (\d+[a-z]?) \(written, " + POINTS + r"\)")
# a lab without concept checks leaves out their count (read as 0)
TOTAL = re.compile(r"\*\*Total: " + POINTS + r" \((\d+) for code, (\d+) for (?:writing|written analysis)"
                   r"(?:, (\d+) for concept checks)?\)")


def _numbers(text):
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)]


def stated_points(lab, cells):
    """Every disagreement between the points the notebook's text states and its metadata ([] if none)."""
    lab_table = table(lab)
    tasks = {t.solution: sum(p for _, p in t.checks) for t in lab_table.tasks}
    concepts = [c.points for c in lab_table.concepts]
    questions = [q.points for q in lab_table.questions]
    wrong = []
    ids = [_meta(c).get("grade_id") for c in cells]
    headings = [(i, m) for i, c in enumerate(cells) if c.cell_type == "markdown"
                for m in TASK_HEADING.finditer(c.source)]
    for k, (i, m) in enumerate(headings):          # a heading: its tasks' points, per function or in all
        end = headings[k + 1][0] if k + 1 < len(headings) else len(cells)
        own = [tasks[g] for g in ids[i:end] if g in tasks]
        stated = [float(x) for x in re.findall(POINTS, m.group(2))]
        if not own or (stated != own and stated != [sum(own)]):
            wrong.append(f"Task {m.group(1)} heading states {stated} points, the metadata {own}")
    seen = {g for k, (i, _) in enumerate(headings)
            for g in ids[i:headings[k + 1][0] if k + 1 < len(headings) else len(cells)] if g in tasks}
    if seen != set(tasks):
        wrong.append(f"tasks under no Task heading: {sorted(set(tasks) - seen)}")
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    if {ord(a) - ord("A") for a, _ in CONCEPT.findall(text)} != set(range(len(concepts))):
        wrong.append(f"the text states the points of concept checks {sorted(set(CONCEPT.findall(text)))}, "
                     f"the metadata has {len(concepts)}")
    numbers = list(dict.fromkeys(n for n, _ in QUESTION.findall(text)))     # "1", "1b", "2", ... in order
    if len(numbers) != len(questions):
        wrong.append(f"the text states the points of questions {sorted(set(QUESTION.findall(text)))}, "
                     f"the metadata has {len(questions)}")
    for letter, p in CONCEPT.findall(text):
        k = ord(letter) - ord("A")
        if k >= len(concepts) or float(p) != concepts[k]:
            wrong.append(f"Concept check {letter} states {p} points, the metadata {concepts[k:k + 1]}")
    for number, p in QUESTION.findall(text):
        k = numbers.index(number)
        if k >= len(questions) or float(p) != questions[k]:
            wrong.append(f"Question {number} states {p} points, the metadata {questions[k:k + 1]}")
    intro = cells[0].source
    header = next(ln for ln in intro.splitlines() if ln.startswith("| Task"))
    column = [c.strip() for c in header.strip("|").split("|")].index("points")
    for line in intro.splitlines():
        if not line.startswith("|") or line.startswith(("| Task", "|---")):
            continue
        row = [c.strip() for c in line.strip("|").split("|")]
        stated, names = _numbers(row[column]), re.findall(r"`(\w+)`", line)
        if "Question" in line:
            expected = questions
        elif "Concept" in line:
            expected = concepts
        else:
            expected = [tasks[f"{n}_solution"] for n in names if f"{n}_solution" in tasks]
            detail = re.search(r"`\s*\(([^)]*)\)", line)       # "(advantages 2, returns 1, ...)": per check cell
            if detail and len(names) == 1:
                cells_points = [p for _, p in lab_table.task(names[0]).checks]
                if _numbers(detail.group(1)) != cells_points:
                    wrong.append(f"intro table: {names[0]}'s check cells stated {detail.group(1)!r}, the metadata {cells_points}")
            if stated == [sum(expected)]:
                continue
        if stated != expected:
            wrong.append(f"intro table row {row[:2]} states {stated}, the metadata {expected}")
    total = TOTAL.search(intro)
    code = sum(tasks.values())
    expected = [code + sum(questions) + sum(concepts), code, sum(questions), sum(concepts)]
    if total is None or [float(x or 0) for x in total.groups()] != expected:
        wrong.append(f"the total states {total and total.group(0)}, the metadata {expected} (all, code, writing, concepts)")
    return wrong


@pytest.mark.parametrize("lab", LABS)
def test_the_text_states_the_metadatas_points(lab):
    assert stated_points(lab, _cells("source", lab)) == []
    assert stated_points(lab, _cells("release", lab)) == []


def test_the_points_check_sees_a_wrong_heading_table_row_and_total():
    cells = _cells("source", "lab12")
    heading = next(i for i, c in enumerate(cells) if "### Task 3 " in c.source)
    cells[heading].source = cells[heading].source.replace("(3 points", "(4 points")
    cells[0].source = cells[0].source.replace("| `bt_loss` | 2 |", "| `bt_loss` | 3 |").replace("15 for code", "14 for code")
    wrong = stated_points("lab12", cells)
    assert len(wrong) == 3 and "Task 3" in wrong[0] and "bt_loss" in wrong[1] and "total" in wrong[2], wrong


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
    assert 3 <= len(answers) <= 7
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
