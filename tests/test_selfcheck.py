"""course_utils.selfcheck: what a student's `make check` reports.

Fast tests read verdicts off hand-made executed notebooks; the slow ones run real kernels on the
release notebook and on solved copies (course_staff/testbed/harness.py) with a mistake spliced in.
"""

import nbformat
import pytest

from course_staff.testbed.lab_tables import table

from course_utils import selfcheck


def check_cell(grade_id, source="check()", outputs=(), execution_count=1, points=2):
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": grade_id, "points": points, "locked": True}})
    cell.outputs, cell.execution_count = list(outputs), execution_count
    return cell


def notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def stderr(text):
    return nbformat.v4.new_output("stream", name="stderr", text=text)


HEADING = nbformat.v4.new_markdown_cell("## 1. Log-probs\n### Task 1a — `response_logprobs` (2 points)")
ANSWER = nbformat.v4.new_code_cell("def f(): raise NotImplementedError()",
                                   metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "f_sol"}})


def test_each_check_gets_its_task_and_verdict():
    nb = notebook(HEADING, ANSWER, check_cell("test_a"), check_cell("test_b"), check_cell("test_c"),
                  nbformat.v4.new_markdown_cell("### Task 2 — `g`"), check_cell("test_d"))
    errors = {2: {"ename": "NotImplementedError", "evalue": ""},
              3: {"ename": "AnswerError", "evalue": "f(x): expected [1.0]\n  but got [2.0]"},
              4: {"ename": "TypeError", "evalue": "f() missing 1 required positional argument: 'x'"}}
    found = selfcheck.verdicts(nb, errors)
    assert [(v.status, v.label) for v in found] == [
        ("unfinished", "Task 1a — `response_logprobs` (2 points) [check test_a]"),
        ("failed", "Task 1a — `response_logprobs` (2 points) [check test_b]"),
        ("failed", "Task 1a — `response_logprobs` (2 points) [check test_c]"),
        ("passed", "Task 2 — `g` [check test_d]")]
    assert found[1].message == "f(x): expected [1.0]\n  but got [2.0]"            # the check's own words
    assert found[2].message.startswith("TypeError: f() missing")


def test_a_task_checked_in_parts_names_each_part_and_its_points():
    heading = nbformat.v4.new_markdown_cell("### Task 4 — GAE (4 points, ~20 min)")
    parts = [check_cell("test_adv", "# [read-only] Task 4 checks, part 1 of 2 (3 points): the advantages\ncheck()", points=3),
             check_cell("test_ret", "# [read-only] Task 4 checks, part 2 of 2 (1 point): the returns\ncheck()", points=1)]
    found = selfcheck.verdicts(notebook(heading, ANSWER, *parts), {3: {"ename": "NotImplementedError"}})
    assert [(v.status, v.label) for v in found] == [
        ("passed", "Task 4 — GAE, part 1 of 2 (3 points): the advantages [check test_adv]"),
        ("unfinished", "Task 4 — GAE, part 2 of 2 (1 point): the returns [check test_ret]")]


def test_each_part_of_one_of_a_tasks_two_functions_gets_its_own_label():
    """Lab 11's Task 4 has two functions, and its first one three parts: each part is named with its function and
    the first sentence of what it checks (the cell's first line goes on about the toy)."""
    heading = nbformat.v4.new_markdown_cell("### Task 4 — `f` (3 points, ~15 min) and `g` (2 points, ~10 min)")
    parts = [check_cell("test_f", "# [read-only] Task 4 checks (f), part 1 of 2 (1 point): pi_star. Four responses (a,\n"
                        "check()", points=1),
             check_cell("test_f_z", "# [read-only] Task 4 checks (f), part 2 of 2 (1 point): log_Z, on part 1's\ncheck()",
                        points=1)]
    found = selfcheck.verdicts(notebook(heading, ANSWER, *parts), {})
    assert [v.label for v in found] == ["Task 4 — f, part 1 of 2 (1 point): pi_star [check test_f]",
                                        "Task 4 — f, part 2 of 2 (1 point): log_Z, on part 1's [check test_f_z]"]


def test_errors_outside_checks_are_reported_and_answers_are_not_checks():
    broken = nbformat.v4.new_code_cell("x = undefined_name")
    nb = notebook(HEADING, ANSWER, broken, check_cell("test_a"))
    found = selfcheck.verdicts(nb, {1: {"ename": "NotImplementedError"},
                                    2: {"ename": "NameError", "evalue": "name 'undefined_name' is not defined"}})
    assert [(v.status, v.label) for v in found] == [
        ("unfinished", "Task 1a — `response_logprobs` (2 points) [cell 2, not a check]"),
        ("failed", "Task 1a — `response_logprobs` (2 points) [cell 3, not a check]"),
        ("passed", "Task 1a — `response_logprobs` (2 points) [check test_a]")]
    assert "NameError" in found[1].message


def test_stderr_fails_a_check_but_warnings_do_not():
    warned = check_cell("test_w", outputs=[stderr("/x.py:3: UserWarning: careful\n  warnings.warn('careful')\n")])
    printed = check_cell("test_p", outputs=[stderr("debug: 3\n")])
    found = selfcheck.verdicts(notebook(HEADING, warned, printed), {})
    assert [v.status for v in found] == ["passed", "failed"]
    assert found[1].message.startswith("wrote to stderr, so the graders score this cell 0 points although its "
                                       "visible checks passed")
    assert found[1].message.endswith("it wrote: debug: 3")


def answer_cell(text, grade_id="answer_q1", points=2):
    return nbformat.v4.new_markdown_cell(text, metadata={"nbgrader": {
        "grade": True, "solution": True, "grade_id": grade_id, "points": points, "locked": False}})


def concept(source):
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "solution": True, "grade": False, "grade_id": "concept_x"}})


def test_unwritten_answers_and_placeholder_concept_checks_are_unfinished(capsys):
    question = nbformat.v4.new_markdown_cell("#### Question 1 (written, 2 points) — why?")
    nb = notebook(HEADING, ANSWER, check_cell("test_a"), question, answer_cell("YOUR ANSWER HERE"),
                  answer_cell("Because the KL is an expectation.", "answer_q2", 1),
                  concept("def c():\n    return 1.0  # TODO"), check_cell("test_concept_x", points=1),
                  concept("def d():\n    return 12.0"), check_cell("test_concept_y", points=1))
    found = selfcheck.verdicts(nb, {})
    assert [(v.status, v.points) for v in found] == [
        ("passed", 2), ("unfinished", 2), ("written", 1), ("unfinished", 1), ("answered", 1)]
    assert found[1].label == "Question 1 (written, 2 points) — why? [written answer answer_q1, 2 points]"
    assert "YOUR ANSWER HERE" in found[1].message and "placeholder" in found[3].message
    assert selfcheck.report("lab11/lab11.ipynb", found) == 2            # unfinished, not "all passed"
    out = capsys.readouterr().out
    assert "-> 1 passed, 0 failed, 2 unfinished (1 answered, 1 written); 3 points still unfinished" in out
    assert selfcheck.exit_status(v.status for v in found if v.status != "unfinished") == 0


def test_timeouts_and_a_dead_kernel_fail():
    never_ran = check_cell("test_late", execution_count=None)
    nb = notebook(HEADING, check_cell("test_slow"), never_ran)
    found = selfcheck.verdicts(nb, {1: {"ename": "KeyboardInterrupt", "evalue": ""}}, fatal="the kernel died")
    assert [v.status for v in found] == ["failed", "failed"]
    assert f"stopped after {selfcheck.CELL_LIMIT_S} s" in found[0].message
    assert found[1].message == "did not run: the kernel died"


def test_exit_status_and_report(capsys):
    assert selfcheck.exit_status([]) == 0
    assert selfcheck.exit_status(["passed", "passed"]) == 0
    assert selfcheck.exit_status(["passed", "unfinished"]) == 2
    assert selfcheck.exit_status(["unfinished", "failed", "passed"]) == 1
    found = [selfcheck.Verdict("Task 1 [check test_a]", "failed", "expected 1\nbut got 2"),
             selfcheck.Verdict("Task 2 [check test_b]", "unfinished")]
    assert selfcheck.report("lab11/lab11.ipynb", found) == 1
    out = capsys.readouterr().out
    assert "  failed      Task 1 [check test_a]\n              expected 1\n              but got 2\n" in out
    assert "-> 0 passed, 1 failed, 1 unfinished" in out


def test_lab_notebooks_are_those_with_checks(tmp_path):
    for rel, nb in {"lab11/lab11.ipynb": notebook(check_cell("t")), "lab12/lab12.ipynb": notebook(check_cell("t")),
                    "notebooks/00_start_here.ipynb": notebook(HEADING),
                    "lab11/.ipynb_checkpoints/lab11-checkpoint.ipynb": notebook(check_cell("t"))}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(tmp_path / rel))
    assert [p.relative_to(tmp_path).as_posix() for p in selfcheck.lab_notebooks(tmp_path)] == [
        "lab11/lab11.ipynb", "lab12/lab12.ipynb"]
    assert selfcheck.main([str(tmp_path / "notebooks")]) == 1               # nothing to check: say so


# ----------------------------------------------------------------------------- real kernels
# (the release notebooks, blank, all "unfinished" and none "failed": tests/test_student_edition.py runs
# `make check` on both in the student edition's own venv)
@pytest.mark.slow
def test_a_mistake_a_slow_cell_and_the_rest_passing(tmp_path, monkeypatch):
    from course_staff.testbed.harness import solved_submission

    nb = solved_submission("lab11", edits={
        "response_logprobs_solution": [("F.log_softmax(", "F.softmax(")]})
    nb.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))          # a student's own cell
    path = tmp_path / "lab11" / "lab11.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, str(path))
    before = path.read_bytes()
    monkeypatch.setattr(selfcheck, "CELL_LIMIT_S", 15)       # the last cell costs 15 s, not 30
    found = selfcheck.verdicts(*selfcheck.run(path))
    checks = {v.label.split("[check ")[-1].rstrip("]"): v for v in found if "[check " in v.label}
    assert checks.pop("test_response_logprobs").message.endswith(
        "Likely mistake: softmax instead of log_softmax (probabilities, not log-probabilities).")
    assert {v.status for v in checks.values()} == {"passed", "answered"}      # answered: the concept checks
    assert len(checks) == len(table("lab11").auto_marks()) - 1
    slow = [v for v in found if "not a check" in v.label]
    assert [(v.status, v.message) for v in slow] == [("failed", "stopped after 15 s, as the graders would stop it")]
    assert path.read_bytes() == before                                      # the student's file is untouched


def test_headings_lose_their_latex_in_labels():
    """make check prints headings in a terminal: no raw ``$k_1$`` or ``$\\lambda$`` (controls: text without math)."""
    assert selfcheck.plain("why can $k_1$ be negative when $k_3$ cannot?") == "why can k1 be negative when k3 cannot?"
    assert selfcheck.plain("no KL penalty ($\\beta = 0$)") == "no KL penalty (β = 0)"
    assert selfcheck.plain("GAE's $\\lambda$ and $\\pi^{*}$") == "GAE's λ and π*"
    assert selfcheck.plain("Task 2 — `sample` (3 points)") == "Task 2 — `sample` (3 points)"
