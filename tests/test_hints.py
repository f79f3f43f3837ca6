"""Hints teach, they do not dictate: every task has a three-rung hint ladder, and no line of any
instructor's solution appears anywhere a student can read it in the released notebooks.

    rung 1  the idea (which quantity, why)
    rung 2  the structure (which tensors and shapes, which family of operations)
    rung 3  a tiny worked example in numbers

A solution line is a line between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of a source
notebook. It is compared, without spaces, as a whole and by its right-hand side (what follows
``return`` or the assignment), against every markdown and code cell of release/<lab>/<lab>.ipynb.
Exempt are what the lab itself states in the solution cell's docstring or its given code cells
(the seed's own text), and fragments shorter than ``MIN_CHARS`` such as ``pairs = []`` or
``return loss, stats``, which are common Python and reveal no answer.

`python -m tests.test_hints OLD_RELEASE_NB SOURCE_NB` prints what it finds in any pair of
notebooks (used to show that the old notebooks failed).
"""

import builtins
import io
import keyword
import re
import sys
import tokenize

import nbformat
import pytest

from course_staff.course import LABS, REPO
from course_staff.edition.leaks import split_cell
from course_staff.testbed.lab_tables import table

MIN_CHARS = 10
RUNGS = ("Hint 1", "Hint 2", "Hint 3")
_ASSIGN = re.compile(r"^(?:return\s+|[A-Za-z_][\w, \[\]\.]*\s*[-+*/]?=(?!=)\s*)(.+)$")


def _squash(text):
    return "".join(text.split())


def _code(line):
    """A solution line without its trailing comment, or None for a comment or a blank."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    return re.sub(r"\s+#[^'\"]*$", "", line)


def fragments(line):
    """The pieces of one solution line that must not be shown: the line and its right-hand side."""
    code = _code(line)
    if code is None:
        return set()
    found = {_squash(code)}
    rhs = _ASSIGN.match(code)
    if rhs:
        found.add(_squash(rhs.group(1)))
    return {f for f in found if len(f) >= MIN_CHARS}


def _given_text(nb):
    """What the lab itself shows in its given code: the seed's docstrings and given cells."""
    shown = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("locked")) and not meta.get("grade"):
            shown += split_cell(cell)["shown"]
    return _squash("\n".join(shown))


def cell_lines(nb, kind, part):
    """[(grade_id, line)] of the ``part`` lines (split_cell's "shown", "SOLUTION", ...) of every code cell
    whose nbgrader metadata marks it ``kind`` ("solution" or "grade")."""
    return [(cell.metadata["nbgrader"].get("grade_id"), line) for cell in nb.cells
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get(kind)
            for line in split_cell(cell)[part]]


def shown_solution_lines(source_nb, release_nb):
    """[(solution cell, fragment, release cell index)] of every solution fragment shown in release."""
    given = _given_text(source_nb)
    cells = [(i, _squash(c.source)) for i, c in enumerate(release_nb.cells)]
    found = []
    for gid, line in cell_lines(source_nb, "solution", "SOLUTION"):
        for frag in sorted(fragments(line)):
            if frag not in given:
                found += [(gid, frag, i) for i, text in cells if frag in text]
    return found


def _read(path):
    return nbformat.read(str(path), as_version=4)


@pytest.mark.parametrize("lab", LABS)
def test_no_solution_line_in_release(lab):
    found = shown_solution_lines(_read(REPO / "source" / lab / f"{lab}.ipynb"),
                                 _read(REPO / "release" / lab / f"{lab}.ipynb"))
    assert not found, "\n".join(f"{cell}: `{frag}` shown in release cell {i + 1}" for cell, frag, i in found)


def test_fragments_of_a_line():
    assert fragments("    return -F.logsigmoid(r_chosen - r_rejected).mean()   # one line") == {
        "return-F.logsigmoid(r_chosen-r_rejected).mean()", "-F.logsigmoid(r_chosen-r_rejected).mean()"}
    assert fragments("    pairs = []") == set()
    assert fragments("# a comment") == set()


def test_a_shown_line_is_found():
    """The check can fail: a hint that quotes the solution's line is caught."""
    nb = _read(REPO / "source" / "lab12" / "lab12.ipynb")
    release = _read(REPO / "release" / "lab12" / "lab12.ipynb")
    release.cells.append(nbformat.v4.new_markdown_cell("Hint: `-F.logsigmoid(r_chosen - r_rejected).mean()`"))
    assert [(c, f) for c, f, _ in shown_solution_lines(nb, release)] == [
        ("bt_loss_solution", "-F.logsigmoid(r_chosen-r_rejected).mean()")]


# ----------------------------------------------------------------------------- visible checks vs solutions
# A visible check must test against numbers or an independent formulation, never the solution's own
# expression with other variable names (`torch.expm1(-lw) + lw` is the k3 line `torch.expm1(-log_ratio)
# + log_ratio`). So each solution line's right-hand side is compared as a token pattern in which every
# variable stands for "some name" (bound consistently), and modules, attributes, keywords, builtins and
# numbers stay as they are.
MIN_TOKENS = 6          # shorter patterns (`a + b`, `x * mask`) are common arithmetic, not an answer
MODULES = {"torch", "F", "np", "math", "nn"}


def _tokens(code):
    """The significant tokens of one line of code (strings and numbers as they are)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
            if tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
                out.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass                                        # an unbalanced line: its tokens so far
    return out


def _is_variable(tokens, i):
    name = tokens[i]
    return (name.isidentifier() and not keyword.iskeyword(name) and name not in MODULES
            and not hasattr(builtins, name) and (i == 0 or tokens[i - 1] != "."))


def pattern(code):
    """The token pattern of a piece of code: variables become $0, $1, ... in order of appearance."""
    tokens, names, out = _tokens(code), {}, []
    for i, tok in enumerate(tokens):
        out.append(f"${names.setdefault(tok, len(names))}" if _is_variable(tokens, i) else tok)
    return tuple(out)


def _occurs(pat, tokens):
    """Does the pattern occur in ``tokens``, its variables bound to variables consistently?"""
    for start in range(len(tokens) - len(pat) + 1):
        bound, ok = {}, True
        for k, want in enumerate(pat):
            got = tokens[start + k]
            if want.startswith("$"):
                ok = _is_variable(tokens, start + k) and bound.setdefault(want, got) == got
                ok = ok and list(bound.values()).count(got) == 1
            else:
                ok = got == want
            if not ok:
                break
        if ok:
            return True
    return False


def solution_patterns(nb):
    """{pattern: (solution cell, line)} of every solution line's right-hand side."""
    found = {}
    for gid, line in cell_lines(nb, "solution", "SOLUTION"):
        code = _code(line)
        rhs = _ASSIGN.match(code or "")
        if rhs:
            pat = pattern(rhs.group(1))
            operations = [t for t in pat if not t.startswith("$") and t not in ",()[]"]
            if len(pat) >= MIN_TOKENS and len(operations) >= 2:      # not a bare tuple of names
                found[pat] = (gid, code)
    return found


def solution_in_visible_checks(nb):
    """[(check cell, solution cell, solution line, check line)] of every solution expression that a
    visible check computes, under any variable names."""
    patterns = solution_patterns(nb)
    found = []
    for gid, line in cell_lines(nb, "grade", "shown"):
        tokens = _tokens(_code(line) or "")
        found += [(gid, sol, code, line.strip()) for pat, (sol, code) in patterns.items() if _occurs(pat, tokens)]
    return found


@pytest.mark.parametrize("lab", LABS)
def test_no_solution_expression_in_a_visible_check(lab):
    found = solution_in_visible_checks(_read(REPO / "source" / lab / f"{lab}.ipynb"))
    assert not found, "\n".join(f"{check} computes {sol}'s `{code}` as `{line}`" for check, sol, code, line in found)


def test_a_renamed_solution_expression_is_found():
    """The check can fail: the k3 line with other variable names is caught, common arithmetic is not."""
    pat = pattern("torch.expm1(-log_ratio) + log_ratio")
    assert pat == ("torch", ".", "expm1", "(", "-", "$0", ")", "+", "$0")
    assert _occurs(pat, _tokens("assert_close(k3w, torch.expm1(-lw) + lw, 'k3')"))
    assert not _occurs(pat, _tokens("assert_close(k3w, torch.expm1(-lw) + lv, 'k3')"))
    assert not _occurs(pat, _tokens("assert_close(k3w, [3269001.37, 14.0000003, 5.0e-9], 'k3')"))
    nb = _read(REPO / "source" / "lab12" / "lab12.ipynb")
    check = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_bt_loss")
    check.source = check.source.replace("print(", "z = -F.logsigmoid(won - lost).mean()\n    print(", 1)
    assert [sol for _, sol, _, _ in solution_in_visible_checks(nb)] == ["bt_loss_solution"]


# ----------------------------------------------------------------------------- rungs teach, not the API
# A rung names the idea and the family of operations, never the function that is the line: no
# `torch.x` / `np.x` / `F.x` and none of the library functions the solutions call by name.
API = re.compile(r"\b(?:torch|np|numpy|F)\.\w+|\b(?:gather|multinomial|logsumexp|logaddexp|expm1|log1p|softplus|"
                 r"logsigmoid|log_softmax|clamp|masked_fill|take_along_dim|argmax|errstate|itertools|combinations)\b")


def named_apis(nb):
    """[(rung, name)] of every library function a hint rung names."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for summary, body in re.findall(r"<details><summary>(Hint[^<]*)</summary>(.*?)</details>", cell.source, re.S):
            found += [(summary, name) for name in API.findall(body)]
    return found


@pytest.mark.parametrize("lab", LABS)
def test_no_hint_rung_names_the_api(lab):
    found = named_apis(_read(REPO / "source" / lab / f"{lab}.ipynb"))
    assert not found, "\n".join(f"{lab} {rung!r} names {name}" for rung, name in found)


def test_a_rung_naming_the_api_is_found():
    nb = _read(REPO / "source" / "lab11" / "lab11.ipynb")
    cell = next(c for c in nb.cells if "<summary>Hint 2" in c.source)
    cell.source = cell.source.replace("<summary>Hint 2 — the structure</summary>\n\n",
                                      "<summary>Hint 2 — the structure</summary>\n\nUse `torch.expm1`. ", 1)
    assert ("Hint 2 — the structure", "torch.expm1") in named_apis(nb)


def _ladder(nb, solution_id):
    """The markdown between the code cell before a task's solution cell and that cell."""
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == solution_id)
    text = []
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "code":
            break
        text.append(cell.source)
    return "\n".join(reversed(text))


@pytest.mark.parametrize("lab", LABS)
def test_every_task_has_three_rungs(lab):
    nb = _read(REPO / "release" / lab / f"{lab}.ipynb")
    for row in table(lab).tasks:
        ladder = _ladder(nb, row.solution)
        summaries = re.findall(r"<summary>(.*?)</summary>", ladder)
        for rung in RUNGS:
            assert any(s.startswith(rung) for s in summaries), f"{lab} {row.name}: no {rung!r} above it: {summaries}"
        assert re.search(r"<summary>Hint 3[^<]*example", ladder), f"{lab} {row.name}: rung 3 is not a worked example"


if __name__ == "__main__":
    release, source = map(_read, sys.argv[1:3])
    hits = shown_solution_lines(source, release)
    for cell, frag, i in hits:
        print(f"{cell}: `{frag}` shown in release cell {i + 1}")
    print(f"{len(hits)} solution fragment(s) shown")
    sys.exit(1 if hits else 0)
