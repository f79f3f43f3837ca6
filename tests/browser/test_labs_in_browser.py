"""The labs as students meet them: JupyterLab in headless chromium.

- Each lab with its solutions (the source notebook): Run All finishes without an error, every slider
  moves, its readout shows the new value and its plot re-draws. Screenshots: artifacts/browser/.
- Each release notebook (nothing filled in), run cell by cell past the failing tests as a student
  would: the explore cells print "Finish Task N first" instead of a traceback; only the student's own
  solution and test cells may show one.
- The start-here notebook runs clean.
- In Lab 11's release a task's first hint unfolds on a click, and a written answer can be typed into
  its cell and rendered.
- The staff companion notebooks/beyond_ppo.ipynb runs all (from its cache of results) and its beta
  slider re-draws.
"""

import re

import pytest

from course_staff.course import LABS as course_LABS

from . import jlab
from .conftest import REPO
from .jlab import step

pytestmark = [pytest.mark.slow, pytest.mark.browser]

LABS = list(course_LABS)
RUN_ALL_TIMEOUT_S = 600          # Lab 12 runs its PPO experiments: about 1-2 minutes on a laptop
CELL_TIMEOUT_S = 180
# "Finish Task 2 (...) first, then run this cell again.", "Fit the reward model first (Tasks 1 and 2)"
FRIENDLY = re.compile(r"\bTasks? \d.*\bfirst\b|\bfirst\b.*\bTasks? \d")       # within one line
BETA = re.compile(r"^(beta|β)", re.I)
TEMPERATURE = re.compile(r"^(T|temperature|τ)\b", re.I)
SLIDERS = {"lab11": (BETA, TEMPERATURE), "lab12": (BETA, TEMPERATURE), "lab13": (BETA,)}   # each lab shows these at least


def notebook(relpath):
    path = REPO / relpath
    if not path.exists():
        pytest.fail(f"{relpath} is missing", pytrace=False)
    cells = jlab.notebook_cells(path)
    return path, cells


def check_kernelspec(path):
    import nbformat
    spec = nbformat.read(str(path), as_version=4).metadata.get("kernelspec", {})
    assert spec.get("name") == "python3", \
        f"{path.name}: kernelspec {spec!r}; without python3 JupyterLab asks students to pick a kernel"


def errors_by_cell(page):
    """{cell index: text of its stderr/traceback outputs}."""
    return {i: jlab.describe([o for o in outs if jlab.is_error(o)])
            for i, outs in enumerate(jlab.outputs(page)) if any(jlab.is_error(o) for o in outs)}


def assert_all_ran_clean(page, cells, what):
    jlab.menu(page, "View", "Expand All Code")     # a folded cell (Lab 12's run B) shows no prompt until then
    prompts = jlab.prompts(page)
    not_run = [i for i, c in enumerate(cells) if c.cell_type == "code" and not re.search(r"\[\d+\]", prompts[i] or "")]
    errors = errors_by_cell(page)
    if errors:
        raise AssertionError(f"{what}: error output in cell(s) {sorted(errors)}:\n" + "\n".join(
            f"--- cell {i}:\n{text}" for i, text in errors.items()))
    if not_run:
        raise AssertionError(f"{what}: code cells {not_run} did not run (prompts {[prompts[i] for i in not_run]})")


@pytest.mark.parametrize("lab", LABS)
def test_solution_notebook_runs_and_sliders_redraw(lab_page, lab):
    page, server = lab_page
    relpath = f"source/{lab}/{lab}.ipynb"
    path, cells = notebook(relpath)
    check_kernelspec(path)
    with step(page, f"{lab} (solutions): open {relpath} and wait for '(ipykernel) | Idle'", lab):
        jlab.open_notebook(page, server, relpath)
    with step(page, f"{lab} (solutions): Run All", lab):
        jlab.run_all(page, RUN_ALL_TIMEOUT_S)
    with step(page, f"{lab} (solutions): every code cell ran without error output", lab):
        assert_all_ran_clean(page, cells, f"{lab} with solutions")

    n = jlab.sliders(page).count()
    wanted = SLIDERS.get(lab, ())
    with step(page, f"{lab} (solutions): its sliders ({', '.join(w.pattern for w in wanted)}) are shown", lab):
        assert wanted, f"{lab}: say in SLIDERS which sliders it shows"
        labels = [jlab.slider_state(jlab.sliders(page).nth(k))["label"] for k in range(n)]
        for slider in wanted:
            assert any(slider.search(x) for x in labels), f"no slider {slider.pattern} among {labels}"
    for k in range(n):
        slider = jlab.sliders(page).nth(k)
        label = labels[k]
        with step(page, f"{lab} (solutions): move slider {k} ({label!r}), readout and plot update", lab):
            before, after = jlab.move_slider(page, slider)
            print(f"[browser]   {label}: {before['readout']} -> {after['readout']}, "
                  f"{'new plot image' if before['imgs'] else 'new table'} (cell {before['cell']})")
            assert all(len(alt) > 80 for alt in before["alts"] + after["alts"]), f"a frame without alt text: {after['alts']}"
            assert after["still"] == 0, "JupyterLab drew the static picture meant for front-ends without widgets"
        jlab.show_view(page, slider)
        name = f"{lab}-slider{k}-{re.sub(r'[^A-Za-z0-9]+', '', label) or 'slider'}"
        print(f"[browser]   screenshot {jlab.shot(page, name)}")
    jlab.show_view(page, jlab.sliders(page).first)
    jlab.shot(page, lab)


@pytest.mark.parametrize("lab", LABS)
def test_release_notebook_says_finish_task_first(lab_page, lab):
    page, server = lab_page
    relpath = f"release/{lab}/{lab}.ipynb"
    path, cells = notebook(relpath)
    check_kernelspec(path)
    with step(page, f"{lab} (release): open {relpath}", f"{lab}-release"):
        jlab.open_notebook(page, server, relpath)
    with step(page, f"{lab} (release): run every cell in order, going on past failing tests", f"{lab}-release"):
        jlab.run_each_cell(page, CELL_TIMEOUT_S)

    outs = jlab.outputs(page)
    errors = errors_by_cell(page)
    student = {i for i, c in enumerate(cells)
               if c.get("metadata", {}).get("nbgrader", {}).get("solution")
               or c.get("metadata", {}).get("nbgrader", {}).get("grade")}
    explore = [i for i, c in enumerate(cells) if "explore" in jlab.tags(c)]
    friendly = [i for i in explore if any(FRIENDLY.search(o["text"]) for o in outs[i])]
    with step(page, f"{lab} (release): tracebacks only in the student's solution and test cells", f"{lab}-release"):
        stray = dict(sorted((i, t) for i, t in errors.items() if i not in student))
        if stray:
            jlab.scroll_to_top(page, jlab.cells(page).nth(min(stray)))     # for the screenshot
            raise AssertionError("traceback or stderr outside solution/test cells:\n" + "\n".join(
                f"--- cell {i} ({'explore' if i in explore else jlab.grade_id(cells[i]) or 'given code'}):\n{t}"
                for i, t in stray.items()))
    with step(page, f"{lab} (release): explore cells say 'Finish Task N first'", f"{lab}-release"):
        assert explore, "no cell tagged 'explore'"
        for i in friendly:
            line = next(ln for o in outs[i] for ln in o["text"].splitlines() if FRIENDLY.search(ln))
            print(f"[browser]   cell {i}: {line.strip()}")
        assert friendly, f"no explore cell (cells {explore}) printed 'Finish Task N first'"
        # an explore cell that waits for a task must say so, not stay blank
        silent = [i for i in explore if "needs(" in cells[i].source
                  and not any(o["text"].strip() or o["imgs"] for o in outs[i])]
        if silent:
            jlab.scroll_to_top(page, jlab.cells(page).nth(silent[0]))      # for the screenshot
            raise AssertionError(
                f"explore cells {silent} use needs(...) but showed nothing on the unfilled notebook: "
                "a student cannot tell they wait for a task. First lines:\n" + "\n".join(
                    f"--- cell {i}: {cells[i].source.splitlines()[0]}" for i in silent))
        assert errors, "no test cell failed on the unfilled notebook"
    jlab.scroll_to_top(page, jlab.cells(page).nth(friendly[0]))
    jlab.shot(page, f"{lab}-release")


def run_all_clean(page, server, relpath, name, tag):
    """Open a notebook, Run All, and check that every code cell ran without error output."""
    path, cells = notebook(relpath)
    check_kernelspec(path)
    with step(page, f"{name}: open {relpath}", tag):
        jlab.open_notebook(page, server, relpath)
    with step(page, f"{name}: Run All", tag):
        jlab.run_all(page, RUN_ALL_TIMEOUT_S)
    with step(page, f"{name}: every code cell ran without error output", tag):
        assert_all_ran_clean(page, cells, relpath)


def test_start_here_runs_clean(lab_page):
    page, server = lab_page
    run_all_clean(page, server, "notebooks/00_start_here.ipynb", "start here", "start")
    jlab.scroll_to_top(page, jlab.cells(page).first)
    jlab.shot(page, "start_here")


def test_a_hint_unfolds_and_an_answer_can_be_written(lab_page):
    """A student opens a task's first hint, then writes a written answer and renders it."""
    page, server = lab_page
    relpath = "release/lab11/lab11.ipynb"
    with step(page, "hint: open the release of Lab 11", "hint"):
        jlab.open_notebook(page, server, relpath)
    hint = page.locator(".jp-RenderedMarkdown details", has=page.locator("summary", has_text="Hint 1")).first
    with step(page, "hint: 'Hint 1' of Task 1a is folded, a click unfolds it", "hint"):
        hint.scroll_into_view_if_needed()
        body = hint.locator("p, code").first
        assert not body.is_visible(), "the hint shows before it is opened"
        hint.locator("summary").click()
        body.wait_for(state="visible", timeout=5000)
        assert hint.evaluate("el => el.open"), "the <details> element did not open"
        print(f"[browser]   Hint 1 reads: {body.inner_text()[:80]!r}")
    jlab.scroll_to_top(page, hint)
    jlab.shot(page, "lab11-hint-open")
    first_answer = next(i for i, c in enumerate(jlab.notebook_cells(REPO / relpath))
                        if c.cell_type == "markdown" and c.source.strip() == "YOUR ANSWER HERE")
    answer = jlab.cells(page).nth(first_answer)          # a fixed cell: its text changes below
    words = "A single sample of k1 can be negative: the KL is a mean."
    with step(page, "answer: double-click the first answer cell, type, render", "answer"):
        answer.scroll_into_view_if_needed()
        answer.locator(".jp-RenderedMarkdown").dblclick()
        editor = answer.locator(".jp-InputArea-editor .cm-content")
        editor.wait_for(state="visible", timeout=5000)
        editor.click()
        page.keyboard.press("Control+A")
        page.keyboard.type(words)
        page.keyboard.press("Shift+Enter")
        rendered = answer.locator(".jp-RenderedMarkdown")
        rendered.wait_for(state="visible", timeout=5000)
        assert words in rendered.inner_text(), rendered.inner_text()
        assert "YOUR ANSWER HERE" not in rendered.inner_text()
    jlab.scroll_to_top(page, answer)
    jlab.shot(page, "lab11-answer-written")


def test_beyond_ppo_runs_and_its_beta_slider_redraws(lab_page):
    """The staff companion: Run All from its cache of results, then its beta slider moves and re-draws."""
    page, server = lab_page
    run_all_clean(page, server, "notebooks/beyond_ppo.ipynb", "beyond PPO", "beyond_ppo")
    with step(page, "beyond PPO: its beta slider moves, readout and plot update", "beyond_ppo"):
        found = [jlab.sliders(page).nth(k) for k in range(jlab.sliders(page).count())]
        found = [s for s in found if BETA.search(jlab.slider_state(s)["label"])]
        assert found, "no beta slider in beyond_ppo.ipynb"
        before, after = jlab.move_slider(page, found[0])
        print(f"[browser]   beta: {before['readout']} -> {after['readout']}, new plot image (cell {before['cell']})")
    jlab.show_view(page, found[0])
    print(f"[browser]   screenshot {jlab.shot(page, 'beyond_ppo-slider-beta')}")
