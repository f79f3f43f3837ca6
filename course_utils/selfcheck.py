"""Check your lab notebooks the way the graders' visible checks will, and list what is unfinished.

    python -m course_utils.selfcheck                      # every lab notebook one folder down
    python -m course_utils.selfcheck lab11/lab11.ipynb    # one notebook (or a folder of them)
    python -m course_utils.selfcheck lab12                # one lab (make check LAB=lab12)

    from course_utils.selfcheck import check; check()     # in a lab's notebook: check its saved file

First the file itself (course_utils/notebook_problems.py): a pasted cell, a file under another
name, a deleted or edited read-only cell, the nbgrader metadata lost to another editor, input()
left in a cell, huge outputs, another kernel -- each named with its repair; a notebook that lost
its metadata is not run at all (there is nothing the graders could grade in it).

Each notebook runs top to bottom in a fresh kernel, as the autograder runs it: the experiments are
skipped (they are not graded) and a cell that runs longer than the graders allow is stopped. Your
file is not changed. Then every check cell -- the read-only cell after each task -- is reported as

    passed      the visible checks of the task pass
    failed      with the check's message (what was expected, what came back, the likely mistake);
                also a check cell that wrote to stderr: the graders score it 0 even if its checks pass
    unfinished  the task still raises NotImplementedError
    answered    a concept check whose answer has the right form (the graders check its value)

every written answer as

    written     an answer is there (a TA grades it)
    unfinished  the cell still reads YOUR ANSWER HERE, or is empty

a concept check whose answer is still a placeholder (a TODO, or the NotImplementedError it came
with) as unfinished, and any other cell that stopped with an error. Passing the visible checks is
necessary, not sufficient: the graders test each task on other inputs too. Exit status: 0 when every
check passed and nothing is unfinished, 1 when a cell failed or the file has a problem, 2 when
nothing failed but something (a task, a concept check or a written answer) is unfinished.
"""

import argparse
import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_utils.notebook_problems import INPUT_REPAIR, lab_cells, problems

CELL_LIMIT_S = 30          # the graders stop a cell after this many seconds (nbgrader_config.py reads it)
START_LIMIT_S = 120        # a kernel that imports torch on a busy laptop can take a while to start
EXIT = {"passed": 0, "failed": 1, "unfinished": 2}
DONE = ("answered", "written")   # statuses that count as finished for the exit status
ANSWER_STUB = "YOUR ANSWER HERE"  # what nbgrader leaves in a written answer's cell (nbgrader_config.py sets it)
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"    # ... and in a task's code cell
_BOLD_QUESTION = re.compile(r"^\*\*(Question \d\w* \(written[^*]*)\*\*", re.M)
_PLACEHOLDER = re.compile(r"\bTODO\b|NotImplementedError|" + re.escape(CODE_STUB.splitlines()[0].lstrip("# ")))
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "lambda": "λ", "pi": "π", "rho": "ρ", "tau": "τ"}


def plain(title):
    """A heading's LaTeX as a terminal shows it: ``$k_1$`` -> ``k1``, ``$\\beta = 0$`` -> ``β = 0``."""
    def math(m):
        text = re.sub(r"\\([A-Za-z]+)", lambda g: _GREEK.get(g.group(1), g.group(1)), m.group(1))
        return re.sub(r"[_^{}]", "", text)
    return re.sub(r"\$([^$]+)\$", math, title)


@dataclass
class Verdict:
    """What one cell of a notebook came to: a check cell, or another cell that raised."""

    label: str          # "Task 2 — `sample_with_temperature` (3 points, ~15 min) [check test_sample_...]"
    status: str         # "passed", "failed", "unfinished", "answered" (concept check) or "written"
    message: str = ""   # the check's message, for a failed cell
    points: float = 0   # what the cell is worth


def is_check(cell):
    """An autograded check: an nbgrader grade cell that is not itself an answer."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


def is_answer(cell):
    """A written answer: a markdown cell that nbgrader grades by hand."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and meta.get("grade", False) and meta.get("solution", False)


def is_concept_check(cell):
    """The check cell of a concept check (its grade_id starts with test_concept)."""
    return is_check(cell) and cell.metadata["nbgrader"].get("grade_id", "").startswith("test_concept")


def _answer_verdict(cell, heading):
    meta = cell.metadata["nbgrader"]
    points = float(meta.get("points", 0))
    label = f"{heading} [written answer {meta.get('grade_id', '')}, {points:g} point{'' if points == 1 else 's'}]"
    text = cell.source.strip()
    if not text or ANSWER_STUB in text:
        return Verdict(label, "unfinished", f"not written yet: replace {ANSWER_STUB} with your answer", points)
    return Verdict(label, "written", "a TA grades it", points)


def _stderr_verdict(label, text, points):
    return Verdict(label, "failed", f"wrote to stderr, so the graders score this cell 0 points although its "
                   f"visible checks passed: remove what writes there (a print to sys.stderr, logging)\n"
                   f"  it wrote: {text}", points)


def lab_notebooks(folder):
    """The lab notebooks in ``folder`` or one level below it, e.g. lab11/lab11.ipynb: those with check
    cells, and those named for a lab (one that lost its metadata, `lab12 (1).ipynb`, `lab12-Copy1.ipynb`)."""
    folder = Path(folder)
    labs = lab_cells()
    found = []
    for path in sorted([*folder.glob("*.ipynb"), *folder.glob("*/*.ipynb")]):
        named = any(path.stem == lab or path.stem.startswith((f"{lab} ", f"{lab}-", f"{lab}_")) for lab in labs)
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:  # noqa: BLE001 -- not a notebook nbformat can read: say so if it is a lab's
            if named:
                found.append(path)
            continue
        if named or any(is_check(cell) for cell in nb.cells):
            found.append(path)
    return found


@contextlib.contextmanager
def _grading_env(grading):
    """NBGRADER_EXECUTION set (the notebooks' grading form) or unset, for the kernels started inside."""
    saved = os.environ.pop("NBGRADER_EXECUTION", None)
    if grading:
        os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        yield
    finally:
        os.environ.pop("NBGRADER_EXECUTION", None)
        if saved is not None:
            os.environ["NBGRADER_EXECUTION"] = saved


def run(path, grading=True):
    """Execute a copy of the notebook in a fresh kernel, the way the graders do (``grading=False``:
    the way JupyterLab's Run All does, experiments included and no time limit).

    Returns (the executed notebook, {cell index: the kernel's error reply}, a fatal message or "").
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from course_utils.kernel_client import SteadyKernelManager

    nb = nbformat.read(str(path), as_version=4)
    errors = {}
    client = NotebookClient(
        nb, timeout=CELL_LIMIT_S if grading else None, startup_timeout=START_LIMIT_S, kernel_name="python3",
        kernel_manager_class=SteadyKernelManager, allow_errors=True, interrupt_on_timeout=True,
        resources={"metadata": {"path": str(Path(path).parent)}},
        on_cell_error=lambda cell, cell_index, execute_reply: errors.update({cell_index: execute_reply["content"]}))
    with _grading_env(grading):
        try:
            client.execute(stderr=subprocess.DEVNULL)    # the kernel's own log; cell outputs still come back
        except DeadKernelError:
            return nb, errors, "the kernel died (out of memory, or the code ended the Python process)"
    return nb, errors, ""


def _error_verdict(label, error, points=0):
    """A cell's error reply as a verdict."""
    name, value = error.get("ename", "Error"), error.get("evalue", "")
    if name == "NotImplementedError":
        return Verdict(label, "unfinished", points=points)
    if name == "KeyboardInterrupt":
        return Verdict(label, "failed", f"stopped after {CELL_LIMIT_S} s, as the graders would stop it", points)
    if name == "AnswerError":                     # a check's own message says it all
        return Verdict(label, "failed", value, points)
    if name == "StdinNotImplementedError":        # input() with no keyboard
        return Verdict(label, "failed", f"calls input(), which waits for a keyboard: {INPUT_REPAIR}", points)
    return Verdict(label, "failed", f"{name}: {value}" if value else name, points)


def _stderr(cell):
    """What a cell wrote to stderr besides warnings (the graders fail a check cell that does)."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stderr")
    lines = [ln for ln in text.splitlines() if ln.strip() and "Warning" not in ln and not ln.startswith("  ")]
    return "\n".join(lines)


# "... Task 4 checks, part 1 of 3 (2 points): the advantages" or "... Task 4 checks (tilted_optimum), part 1 of 3
# (1 point): pi_star. Four responses ...": the function (when the task has two), the part, what it checks (its first
# sentence)
_PART = re.compile(r"checks(?: \((?P<function>[^)]*)\))?, (?P<part>part \d+ of \d+ \([^)]*\))(?P<what>:[^.]*)?")


def _check_label(cell, heading):
    """The heading of a check cell's task, and the part of the task it checks when its first line names one
    (a task checked in parts has one heading and a cell per part, each with its own points)."""
    part = _PART.search(cell.source.split("\n", 1)[0])
    if part and part.group("function"):        # one of a task's two functions: "Task 4 — tilted_optimum, part 1 ..."
        heading = f"{heading.split(' — ')[0]} — {part.group('function')}, {part.group('part')}{part.group('what') or ''}"
    elif part:
        heading = f"{re.sub(r' [(][^()]*[)]$', '', heading)}, {part.group('part')}{part.group('what') or ''}"
    return f"{heading} [check {cell.metadata['nbgrader'].get('grade_id', '')}]"


def verdicts(nb, errors, fatal=""):
    """[Verdict] of every check cell and every other cell that raised, in notebook order.

    ``nb`` is the executed notebook, ``errors`` {cell index: error reply} as ``run`` returns them.
    A check cell that never ran (the kernel died before it) counts as failed.
    """
    found, heading, answer = [], "(before the first heading)", ""
    for index, cell in enumerate(nb.cells):
        if is_answer(cell):
            found.append(_answer_verdict(cell, heading))
            continue
        if cell.cell_type == "markdown":
            titles = [plain(ln.lstrip("#").strip()) for ln in cell.source.splitlines() if ln.startswith("#")]
            titles += [m.group(1).rstrip(".") for m in _BOLD_QUESTION.finditer(cell.source)]   # **Question 1 ...**
            heading = titles[-1] if titles else heading
            continue
        if cell.metadata.get("nbgrader", {}).get("solution", False):
            answer = cell.source                  # the code the next check cell tests
        if is_check(cell):
            label = _check_label(cell, heading)
            points = float(cell.metadata["nbgrader"].get("points", 0))
            if index in errors:
                found.append(_error_verdict(label, errors[index], points))
            elif cell.get("execution_count") is None and fatal:
                found.append(Verdict(label, "failed", f"did not run: {fatal}", points))
            elif _stderr(cell):
                found.append(_stderr_verdict(label, _stderr(cell), points))
            elif is_concept_check(cell) and _PLACEHOLDER.search(answer):
                found.append(Verdict(label, "unfinished", "the answer is still a placeholder (a TODO): "
                                     "replace it with your answer", points))
            elif is_concept_check(cell):
                found.append(Verdict(label, "answered", "the answer has the right form; the graders check its value",
                                     points))
            else:
                found.append(Verdict(label, "passed", points=points))
        elif index in errors:
            found.append(_error_verdict(f"{heading} [cell {index + 1}, not a check]", errors[index]))
    _blame_input(nb, errors, found)
    return found


def _blame_input(nb, errors, found):
    """A NameError after a cell whose input() failed: say that this is where it comes from."""
    stopped = [i for i, e in sorted(errors.items()) if e.get("ename") == "StdinNotImplementedError"]
    if not stopped:
        return
    first = stopped[0] + 1
    for v in found:
        if v.message.startswith("NameError"):
            v.message += f" -- probably because cell {first} did not run: it calls input()"


def report(name, found, out=None):
    """Print one notebook's verdicts; returns its exit status (0, 1 or 2)."""
    out = out or sys.stdout
    print(f"\n{name}", file=out)
    for v in found:
        print(f"  {v.status:<11} {v.label}", file=out)
        for line in v.message.splitlines():
            print(f"              {line}", file=out)
    counts = {s: sum(v.status == s for v in found) for s in (*EXIT, *DONE)}
    line = f"  -> {counts['passed']} passed, {counts['failed']} failed, {counts['unfinished']} unfinished"
    extra = [f"{counts[s]} {s}" for s in DONE if counts[s]]
    todo = sum(v.points for v in found if v.status == "unfinished")
    print(line + (f" ({', '.join(extra)})" if extra else "")
          + (f"; {todo:g} points still unfinished" if todo else ""), file=out)
    return exit_status(v.status for v in found)


def exit_status(statuses):
    """1 if anything failed, else 2 if anything is unfinished, else 0."""
    statuses = set(statuses)
    return next((EXIT[s] for s in ("failed", "unfinished") if s in statuses), 0)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_utils.selfcheck", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=["."], help="notebooks, or folders to search (default: .)")
    args = parser.parse_args(argv)
    notebooks = []
    for p in map(Path, args.paths):
        notebooks += [p] if p.suffix == ".ipynb" else lab_notebooks(p)
    if not notebooks:
        print(f"No lab notebook found in {', '.join(args.paths)}: run this in the course folder.")
        return 1
    print(f"Running {len(notebooks)} notebook(s) in a fresh kernel each, the way the graders do ...")
    statuses, broken = [], 0
    for path in notebooks:
        status, wrong = check_file(path)
        statuses.append(status)
        broken += bool(wrong)
    status = exit_status({0: "passed", 1: "failed", 2: "unfinished"}[s] for s in statuses)
    print({0: "\nEvery visible check passes and every answer is there. The graders also test each task on "
              "other inputs, check the concept checks' values, and a TA grades the written answers.",
           1: "\nSome cells failed: read their messages above, fix, and run this again."
              if not broken else "\nFix the problems listed above (each says how), then run this again.",
           2: "\nNothing failed, but some work is unfinished (tasks, concept checks or written answers): "
              "see the lines marked unfinished above."}[status])
    return status


def check_file(path, out=None):
    """Check one notebook file: its problems, then (unless it lost its metadata) its cells run the way
    the graders run them. Prints the report; returns (exit status, [Problem])."""
    out = out or sys.stdout
    try:
        wrong = problems(path)
    except Exception as error:  # noqa: BLE001 -- a file nbformat cannot read
        print(f"\n{path}\n  problem     this file is not a notebook Jupyter can read ({type(error).__name__}: "
              f"{error}): the graders cannot read it either. Open it in a text editor, or fetch a fresh copy of "
              "the lab and copy your answers into it", file=out)
        return 1, [error]
    if wrong:
        print(f"\n{path}: fix these before you submit", file=out)
        for p in wrong:
            print(f"  problem     {p}", file=out)
    if any(p.fatal for p in wrong):
        print("  (not run: fix the problem above first)", file=out)
        return 1, wrong
    status = report(str(path), verdicts(*run(path)), out=out)
    return (1 if wrong else status), wrong


def _this_notebook():
    """The notebook this kernel runs, as JupyterLab (JPY_SESSION_NAME) or VS Code tells it; else None."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    try:
        vscode = get_ipython().user_ns.get("__vsc_ipynb_file__", "")  # noqa: F821 -- inside IPython only
    except NameError:
        vscode = ""
    for candidate in (name, vscode):
        for path in (Path(candidate), Path.cwd() / Path(candidate).name):
            if candidate.endswith(".ipynb") and path.exists():
                return path
    return None


def check(path=None):
    """The pre-submission check from a notebook cell: the saved file of this notebook (save first!), or of
    ``path``, or of every lab notebook here. Prints what `make check` prints; returns its exit status.
    Does nothing while the graders (or this check itself) run the notebook."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return 0
    paths = [Path(path)] if path else [p for p in [_this_notebook()] if p] or lab_notebooks(Path.cwd())
    if not paths:
        print(f"No lab notebook found in {Path.cwd()}: pass its path, e.g. check('lab12.ipynb').")
        return 1
    print("Checking the SAVED file (save the notebook first), in a fresh kernel, the way the graders do ...")
    statuses = [check_file(p)[0] for p in paths]
    return max(statuses, key=lambda s: (s == 1, s == 2))


if __name__ == "__main__":
    sys.exit(main())
