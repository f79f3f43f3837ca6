"""The whole nbgrader lifecycle of every lab, on a temporary copy of the course.

generate_assignment (equal to the committed release/) -> release_assignment -> fetch and submit for
simulated students -> collect -> autograde (ONE call for every lab: the solution gets full marks, so source/
passes its own tests; the blank release fails every check) -> a TA grades written answers in the gradebook, as the formgrader
does -> generate_feedback -> export grades.csv. Every student's score is known in advance, cell by
cell; adversarial students may cost at most their own task, or be reported ungradable with a clear
message. Nothing of the solutions, the model answers or the hidden tests may reach release/ or the
feedback.

The lifecycle runs once per test session (tests/lifecycle.py; tests/test_validate_agrees.py reads the same
run); the tests below check its parts.
"""

import csv
import difflib
import html
import json
import re

import nbformat
import pytest

from course_staff.course import WITHHELD
from course_staff.testbed import harness as h
from course_staff.testbed import students as st
from course_staff.testbed.lab_tables import table
from tests import lifecycle
from tests.lifecycle import LABS, final_expected, ta_grading

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def life():
    run = lifecycle.run()
    print("\n" + lifecycle.report(run))
    return run


# -- release ----------------------------------------------------------------------------------------

_VOLATILE_CELL = ("id", "execution_count")
_VOLATILE_META = ("execution", "collapsed", "scrolled", "trusted")


def _normalized(path):
    nb = nbformat.read(str(path), as_version=4)
    cells = []
    for cell in nb.cells:
        cell = {k: v for k, v in cell.items() if k not in _VOLATILE_CELL}
        cell["metadata"] = {k: v for k, v in cell["metadata"].items() if k not in _VOLATILE_META}
        cells.append(cell)
    return {"metadata": dict(nb.metadata), "cells": cells}


@pytest.mark.parametrize("lab", LABS)
def test_release_is_what_generate_assignment_makes(life, lab):
    generated, committed = life.course / "release" / lab, h.REPO / "release" / lab
    files = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())  # noqa: E731
    assert files(generated) == files(committed), "release/ holds other files than generate_assignment makes"
    new, old = _normalized(generated / f"{lab}.ipynb"), _normalized(committed / f"{lab}.ipynb")
    assert new["metadata"] == old["metadata"]
    assert len(new["cells"]) == len(old["cells"]), f"release/{lab}: run `make release` and commit it"
    for i, (a, b) in enumerate(zip(new["cells"], old["cells"])):
        diff = "\n".join(difflib.unified_diff(json.dumps(b, indent=1, sort_keys=True).splitlines(),
                                             json.dumps(a, indent=1, sort_keys=True).splitlines(),
                                             "committed", "generated", lineterm="", n=1))
        assert a == b, f"release/{lab} cell {i} differs from what source/ generates (run `make release`):\n{diff}"


# -- the solution and the blank release, as autograde ran them (no second run by nbgrader's Validator;
#    the visible checks alone failing on the blank release is the student edition's blank `make check`)

def _check_cells(life, student, lab):
    nb = nbformat.read(str(life.course / "autograded" / student / lab / f"{lab}.ipynb"), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c for c in nb.cells if h._grading(c).get("grade") and c.cell_type == "code"}


@pytest.mark.parametrize("lab", LABS)
def test_source_validates(life, lab):
    """The solution (source/'s solution cells in the release) passes every check, hidden ones included."""
    failed = {gid: [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
              for gid, cell in _check_cells(life, "sol", lab).items()}
    failed = {gid: errors for gid, errors in failed.items() if errors}
    assert not failed, f"source/{lab} does not pass its own tests:\n" + "\n".join(f"{g}: {e}" for g, e in failed.items())
    assert life.autograded[lab]["sol"] == {**st.full_marks(lab), **{q: None for q in table(lab).written_marks()}}
    assert set(life.autograded[lab].flagged.get("sol", ())) == set(table(lab).written_marks()), \
        "the written answers wait for a TA, and nothing else of the solution does"


@pytest.mark.parametrize("lab", LABS)
def test_blank_gets_zero(life, lab):
    """The blank release: 0 on every graded cell, written answers included (tests/test_mutants.py
    grades only the mistakes and variants: the solution and the blank are graded here)."""
    assert life.autograded[lab]["blank"] == {g: 0.0 for g in st.full_marks(lab)}


@pytest.mark.parametrize("lab", LABS)
def test_release_fails_every_test(life, lab):
    cells = _check_cells(life, "blank", lab)
    passing = [gid for gid, cell in cells.items() if not any(o.output_type == "error" for o in cell.outputs)]
    assert cells and not passing, f"release/{lab}: these test cells pass without any solution: {passing}"


# -- the exchange -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lab", LABS)
def test_collect_gathers_every_submission(life, lab):
    for student, (submission, _) in life.rosters[lab].items():
        got = life.course / "submitted" / student / lab / f"{lab}.ipynb"
        assert got.exists(), f"{student}'s {lab} was not collected:\n{life.logs[f'collect {lab}']}"
        assert (got.parent / "timestamp.txt").exists()
        if isinstance(submission, str):
            assert got.read_text() == submission
        else:
            assert nbformat.read(str(got), as_version=4).cells == submission.cells


# -- scores -----------------------------------------------------------------------------------------

def _cases():
    return [(lab, s) for lab in LABS for s in lifecycle.roster(lab)]


@pytest.mark.parametrize("lab,student", _cases())
def test_score(life, lab, student):
    _, expected = life.rosters[lab][student]
    expected = final_expected(lab, student, expected)
    got = life.grades[lab][student]
    if expected is None:
        message = life.grades[lab].ungradable.get(student, "")
        assert got == {} and "not appear to be JSON" in message, (got, message)
        return
    assert got == expected, (
        f"{student} ({lab}): expected {h.total(expected)} points, got {h.total(got)}\n"
        + "\n".join(f"  {gid}: expected {expected.get(gid)}, got {got.get(gid)}"
                    for gid in sorted(set(got) | set(expected)) if got.get(gid) != expected.get(gid)))


FLAGGED = {"patched": "changes `torch.allclose`", "rebound": "rebinds `assert_close`"}


@pytest.mark.parametrize("lab", LABS)
def test_tampering_is_held_for_review(life, lab):
    grades = life.autograded[lab]
    checks = table(lab).auto_marks()
    flagged = {s: FLAGGED[s] for s in life.rosters[lab] if s in FLAGGED}
    held = {s for s, cells in grades.flagged.items() if set(cells) & set(checks)}
    assert held == set(flagged), grades.flagged
    for student, reason in flagged.items():
        assert set(checks) <= set(grades.flagged[student])
        assert reason in grades.log
        page = (life.course / "feedback" / student / lab / f"{lab}.html").read_text()
        text = _text_of_html(page)
        assert WITHHELD in text and reason.replace("`", "") in text


def test_patched_comparisons_do_not_fool_the_checks(life):
    """Before any flag: with torch/numpy/math comparisons patched, every check still failed."""
    lab = "lab11"                                         # the lab whose roster carries this student
    assert "patched" in life.rosters[lab]
    nb = nbformat.read(str(life.course / "autograded" / "patched" / lab / f"{lab}.ipynb"), as_version=4)
    for cell in nb.cells:
        if h._grading(cell).get("grade") and cell.cell_type == "code":
            assert any(o.output_type == "error" for o in cell.outputs), cell.metadata.nbgrader.grade_id


# -- written answers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("lab", LABS)
def test_written_answers_wait_for_a_ta(life, lab):
    """After autograde every written answer is flagged "needs manual grade": answered ones without a
    score, blank ones with 0."""
    grades = life.autograded[lab]
    written = table(lab).written_marks()
    for student, (_, expected) in life.rosters[lab].items():
        if expected is None:
            continue
        assert set(written) <= set(grades.flagged.get(student, ())), (student, grades.flagged.get(student))
        assert {q: grades[student][q] for q in written} == {q: expected[q] for q in written}, student
    assert all(grades["blank"][q] == 0.0 for q in written)
    assert all(grades["sol"][q] is None for q in written)


@pytest.mark.parametrize("lab", LABS)
def test_ta_grades_count_and_reach_the_feedback(life, lab):
    """The TA's scores replace the flags, count in the totals (test_score, test_grades_csv) and show
    in the feedback with the TA's comments."""
    written = table(lab).written_marks()
    for student, marks in ta_grading(lab).items():
        assert not set(written) & set(life.grades[lab].flagged.get(student, ())), student
        text = _text_of_html((life.course / "feedback" / student / lab / f"{lab}.html").read_text())
        for grade_id, (score, comment) in marks.items():
            assert comment in text, f"{student}'s feedback lacks the TA's comment on {grade_id}"
        shown = sorted((float(a), float(b)) for a, b in re.findall(r"Written response \(Score: ([\d.]+) / ([\d.]+)\)", text))
        assert shown == sorted((float(score), written[q]) for q, (score, _) in marks.items()), (student, shown)


@pytest.mark.parametrize("lab", LABS)
def test_max_scores_match_the_source(life, lab):
    assert h.max_scores(life.course, lab) == st.full_marks(lab)


# -- grades.csv -------------------------------------------------------------------------------------

def test_grades_csv(life):
    rows = list(csv.DictReader((life.course / "grades.csv").open()))
    by_key = {(r["assignment"], r["student_id"]): r for r in rows}
    for lab in LABS:
        full = sum(st.full_marks(lab).values())
        for student, (_, expected) in life.rosters[lab].items():
            row = by_key.get((lab, student))
            assert row is not None, f"grades.csv has no row for {student} / {lab}"
            assert float(row["max_score"]) == full
            total = h.total(final_expected(lab, student, expected) or {})
            assert float(row["score"]) == pytest.approx(total), (student, lab, row)


# -- no leaks ---------------------------------------------------------------------------------------

def _secret_lines(lab):
    """Lines of the source that students must never see: solution and hidden-test code (lines
    that also occur in what students do see are not secrets)."""
    nb = nbformat.read(str(h.REPO / "source" / lab / f"{lab}.ipynb"), as_version=4)
    secret, public = set(), set()
    for cell in nb.cells:
        if cell.cell_type == "markdown" and h._grading(cell).get("grade") and h._grading(cell).get("solution"):
            secret |= {line.strip() for line in cell.source.splitlines()}      # a model answer and its rubric
            continue
        inside = None
        for line in cell.source.splitlines():
            s = line.strip()
            if re.match(r"^#+\s*BEGIN (SOLUTION|HIDDEN TESTS)", s):
                inside = True
            elif re.match(r"^#+\s*END (SOLUTION|HIDDEN TESTS)", s):
                inside = None
            elif inside:
                secret.add(s)
            else:
                public.add(s)
    return {s for s in secret - public if len(s) >= 12 and not s.startswith("#")}


def _text_of_html(page):
    page = re.sub(r"(?s)<(style|script)\b.*?</\1>", "", page)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _lines(text):
    return {line.strip() for line in text.splitlines()}


@pytest.mark.parametrize("lab", LABS)
def test_release_leaks_nothing(life, lab):
    folder = h.REPO / "release" / lab
    text = "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    nb = nbformat.read(str(folder / f"{lab}.ipynb"), as_version=4)
    leaked = _secret_lines(lab) & _lines("\n".join(c.source for c in nb.cells))
    assert not leaked, f"release/{lab} shows solution or hidden-test lines: {sorted(leaked)[:5]}"
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert "widgets" not in nb.metadata, "widget state (stale images of a solution run) in release/"
    assert all(not c.get("outputs") for c in nb.cells), "outputs saved in release/"
    assert "application/vnd.jupyter.widget" not in text
    assert not [p for p in folder.rglob("*.py")], "a .py file in release/ may carry solutions"


@pytest.mark.parametrize("lab", LABS)
def test_feedback_leaks_no_hidden_test(life, lab):
    secrets = _secret_lines(lab)
    # the instructor's solution must not reach a student who did not write it
    solution_secrets = {s for s in secrets if any(s in t for t in h.solution_text(lab).values())}
    pages = {}
    for student, (_, expected) in life.rosters[lab].items():
        page = life.course / "feedback" / student / lab / f"{lab}.html"
        if expected is None:
            assert not page.exists()
            continue
        assert page.exists(), f"no feedback for {student}:\n{life.logs['feedback']}"
        pages[student] = page.read_text()
    for student, page in pages.items():
        text = _text_of_html(page)
        hidden = (secrets - solution_secrets) & _lines(text)
        assert not hidden, f"{student}'s feedback shows hidden-test lines: {sorted(hidden)[:5]}"
        assert "BEGIN HIDDEN TESTS" not in text
        assert "application/vnd.jupyter.widget-state" not in page
        own = life.rosters[lab][student][0]
        shown = (solution_secrets & _lines(text)) - _lines("\n".join(c.source for c in own.cells))
        assert not shown and "BEGIN SOLUTION" not in text, \
            f"{student}'s feedback shows the instructor's solution: {sorted(shown)[:5]}"
    # a failed hidden check says what failed (the message), not the code
    assert "Traceback (most recent call last)" not in _text_of_html(pages["blank"])
    assert "NotImplementedError" in _text_of_html(pages["blank"])


def test_gradebook_url_from_the_environment(life, tmp_path):
    """A large course keeps its gradebook elsewhere (PostgreSQL) through NBGRADER_DB_URL."""
    other = tmp_path / "elsewhere.db"
    _, out = h.nbgrader(life.course, "db", "student", "add", "someone",
                        env={"NBGRADER_DB_URL": f"sqlite:///{other}"})
    assert other.exists(), out
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{other}") as gb:
        assert [s.id for s in gb.students] == ["someone"]
    with Gradebook(h.db_url(life.course)) as gb:
        assert "someone" not in {s.id for s in gb.students}
