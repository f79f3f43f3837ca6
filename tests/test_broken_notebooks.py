"""Broken notebooks (tests/broken_notebooks.py) on both sides: what `make check` says, what `make autograde` does.

Student side: the pre-submission check names each entry's problem and its repair, and says nothing
about the solved notebook it was made from (the control). A notebook that lost its metadata is
found, named and not called passing. TA side (slow): every entry is graded in ONE `make autograde`
run of the course's own grader, and each is either graded as the notebook runs, with one line
about the student in the log and the problem atop the feedback, or left ungraded with a line
that says why: never a silent 0.
"""

import re
import subprocess
import sys
from html import unescape

import nbformat
import pytest

from tests import broken_notebooks as bn
from course_staff.testbed import harness as h
from course_staff.edition import lab_cells
from course_utils import notebook_problems, selfcheck
from course_staff.testbed.lab_tables import table


@pytest.fixture(scope="module")
def catalogue():
    return bn.catalogue()


def _write(folder, entry):
    path = folder / bn.LAB / entry.file
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(entry.notebook, str(path))
    return path


def test_the_solved_notebook_has_no_problem(tmp_path):
    path = _write(tmp_path, bn.Broken("solved", bn.solved(), []))
    assert notebook_problems.problems(path) == []


def test_make_check_names_each_problem_and_its_repair(tmp_path, catalogue):
    for entry in catalogue:
        folder = tmp_path / re.sub(r"\W+", "-", entry.name)
        said = "\n".join(map(str, notebook_problems.problems(_write(folder, entry))))
        missing = [s for s in entry.says if s not in said]
        assert not missing, f"{entry.name}: the check said\n{said}\nwithout {missing}"


def test_a_notebook_that_lost_its_metadata_is_found_and_never_passes(tmp_path, capsys):
    entry = next(e for e in bn.catalogue() if e.name == "metadata stripped")
    _write(tmp_path, entry)
    assert [p.name for p in selfcheck.lab_notebooks(tmp_path)] == ["lab12.ipynb"]    # found, not dropped
    assert selfcheck.main([str(tmp_path)]) == 1                                       # and not run at all
    out = capsys.readouterr().out
    assert "lost the nbgrader metadata" in out and "Every visible check passes" not in out
    assert selfcheck.main([str(tmp_path / "lab12" / "lab12.ipynb")]) == 1            # on the file itself too
    assert "Every visible check passes" not in capsys.readouterr().out


def test_a_renamed_lab_is_checked_and_named(tmp_path, capsys):
    nbformat.write(bn.stripped(), str(tmp_path / "lab12 (1).ipynb"))
    assert [p.name for p in selfcheck.lab_notebooks(tmp_path)] == ["lab12 (1).ipynb"]
    assert selfcheck.main([str(tmp_path)]) == 1
    assert "rename it to `lab12.ipynb`" in capsys.readouterr().out


def test_input_errors_say_why(capsys):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('seed = int(input("seed? "))'),
                                         nbformat.v4.new_code_cell("print(seed)")])
    errors = {0: {"ename": "StdinNotImplementedError", "evalue": "raw_input was called, but this frontend does "
                  "not support input requests."},
              1: {"ename": "NameError", "evalue": "name 'seed' is not defined"}}
    found = selfcheck.verdicts(nb, errors)
    assert found[0].message.startswith("calls input(), which waits for a keyboard")
    assert "StdinNotImplementedError" not in found[0].message
    assert found[1].message == ("NameError: name 'seed' is not defined -- probably because cell 1 did not run: "
                                "it calls input()")
    assert selfcheck.verdicts(nb, {1: errors[1]})[0].message == "NameError: name 'seed' is not defined"  # control


def test_lab_cells_json_is_the_release(tmp_path):
    """course_utils/data/lab_cells.json names the release's cells (make release rewrites it), and no text."""
    shipped = notebook_problems.lab_cells()
    assert shipped == lab_cells.build(), "course_utils/data/lab_cells.json is stale: run make release"
    assert set(shipped) == set(h.LABS)
    assert all(set(c) == {"id", "kind", "type"} for cells in shipped.values() for c in cells)


def test_the_hub_validate_reports_the_problems(tmp_path):
    from course_utils import validate_hook

    entry = next(e for e in bn.catalogue() if e.name == "pasted check cell")
    path = _write(tmp_path, entry)
    result = validate_hook.problems_result(str(path))
    assert result["success"] is False and "check cell `test_bt_loss` appears twice" in result["value"]
    assert validate_hook.problems_result(str(_write(tmp_path / "ok", bn.Broken("solved", bn.solved(), [])))) is None


# ----------------------------------------------------------------------------- real kernels
@pytest.mark.slow
def test_make_check_runs_input_with_a_message(tmp_path):
    entry = next(e for e in bn.catalogue() if e.name == "input() left in")
    path = _write(tmp_path, entry)
    proc = subprocess.run([sys.executable, "-m", "course_utils.selfcheck", str(path)], env=h._env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 1, proc.stdout
    for said in entry.says + entry.runs:
        assert said in proc.stdout, (said, proc.stdout)
    assert "StdinNotImplementedError" not in proc.stdout


def _slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, catalogue):
    """The catalogue and the solved notebook, collected, then ONE `make autograde LAB=lab12` and feedback."""
    course = h.course_copy(tmp_path_factory.mktemp("broken"), labs=(bn.LAB,))
    for entry in catalogue + [bn.Broken("solved", bn.solved(), [])]:
        folder = course / "submitted" / _slug(entry.name) / bn.LAB
        h._write(folder / entry.file, entry.notebook)
        (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    proc = subprocess.run([sys.executable, "-m", "course_staff.grading.class_grading", "autograde", bn.LAB],
                          cwd=course, env=h._env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout)
    h.nbgrader(course, "generate_feedback", bn.LAB, check=False)
    students = [_slug(e.name) for e in catalogue] + ["solved"]
    return course, proc.stdout, h.read_grades(course, bn.LAB, students)


def _lines_about(log, student):
    """The student's result line and the log lines under it."""
    block = re.search(rf"^  \[\d+/\d+\] {re.escape(student)}: .*?(?=^  \[|\Z|^lab12: graded)", log, re.M | re.S)
    return block.group(0) if block else ""


@pytest.mark.slow
def test_autograde_grades_each_or_says_why(graded, catalogue):
    course, log, grades = graded
    solved = grades["solved"]
    assert h.total(solved) == sum(table(bn.LAB).auto_marks().values())          # the control: full marks
    assert "NOTEBOOK PROBLEM" not in _lines_about(log, "solved")
    for entry in catalogue:
        student = _slug(entry.name)
        if not entry.graded:
            assert grades[student] == {}, entry.name
            assert re.search(rf"^NOT GRADED {student}: .*{re.escape(entry.logged)}", log, re.M), entry.name
            continue
        expected = {gid: (0.0 if gid in entry.lost else score) for gid, score in solved.items()}
        assert grades[student] == expected, f"{entry.name}: {grades[student]} != {expected}"
        assert set(entry.review) <= set(grades.flagged.get(student, ())), (entry.name, grades.flagged.get(student))
        lines = _lines_about(log, student)
        problem = [ln for ln in lines.splitlines() if "NOTEBOOK PROBLEM" in ln]
        assert len(problem) == 1, f"{entry.name}: want one NOTEBOOK PROBLEM line, got\n{lines}"
        assert (entry.logged or entry.says[0]) in problem[0], (entry.name, problem[0])


@pytest.mark.slow
def test_the_feedback_names_the_problem_and_its_repair(graded, catalogue):
    course, _, _ = graded
    for entry in catalogue:
        if not entry.graded:
            continue
        html = (course / "feedback" / _slug(entry.name) / bn.LAB / f"{bn.LAB}.html").read_text()
        text = unescape(re.sub(r"<[^>]+>", "", html)).replace("`", "")       # markdown's code spans are tags
        assert "Problems the graders found in this notebook" in text, entry.name
        assert all(said.replace("`", "") in text for said in entry.says), entry.name
    solved = (course / "feedback" / "solved" / bn.LAB / f"{bn.LAB}.html").read_text()
    assert "Problems the graders found" not in solved


def _ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_lost_metadata_is_given_back_from_the_release():
    from course_staff.grading.nbgrader_plugins import restore_metadata

    release, solved = h.blank_submission(bn.LAB), bn.solved()
    nb = bn.stripped()
    assert restore_metadata(nb, release) == []
    assert _ids(nb) == _ids(solved)                     # every cell is the one it was, answers included
    assert [c.source for c in nb.cells] == [c.source for c in solved.cells]
    # a student's own markdown note next to a written answer: that answer cannot be told apart
    nb = bn.stripped()
    at = _ids(solved).index(bn.WRITTEN)
    nb.cells.insert(at, nbformat.v4.new_markdown_cell("my notes"))
    unplaced = restore_metadata(nb, release)
    assert bn.WRITTEN in unplaced and all(gid.startswith("answer_") for gid in unplaced)
    assert "test_bt_loss" in _ids(nb) and bn.TASK_ANSWER in _ids(nb)


def test_a_pasted_cell_keeps_one_copy_the_one_with_the_work():
    from course_staff.grading.nbgrader_plugins import keep_one_copy

    nb = bn.pasted_answer()                             # the worked copy first, the release's stub last
    assert keep_one_copy(nb) == [bn.TASK_ANSWER]
    kept = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == bn.TASK_ANSWER]
    assert len(kept) == 1 and "NotImplementedError" not in kept[0].source
    nb = bn.pasted_check()
    assert keep_one_copy(nb) == [bn.TASK_CHECK] and _ids(nb).count(bn.TASK_CHECK) == 1
    assert keep_one_copy(bn.solved()) == []


def test_the_checksum_is_nbgraders():
    """course_utils computes nbgrader's cell checksum itself (students do not install nbgrader)."""
    from nbgrader.utils import compute_checksum

    cells = [c for lab in h.LABS for nb in (h.blank_submission(lab), h.solved_submission(lab)) for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade_id")]
    assert len(cells) > 100
    assert all(notebook_problems.checksum(c) == compute_checksum(c) for c in cells)
    edited = bn.edited_check().cells[bn._index(bn.edited_check(), bn.TASK_CHECK)]
    assert notebook_problems.checksum(edited) != edited.metadata.nbgrader["checksum"]      # an edit shows


def test_check_in_a_notebook_cell_does_nothing_while_graded(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert selfcheck.check() == 0 and capsys.readouterr().out == ""
