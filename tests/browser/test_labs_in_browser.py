"""The labs as students meet them: in plain Jupyter, and in JupyterLab in headless chromium.

- Each lab with its solutions (the source notebook) runs ONCE, in a kernel of the JupyterLab server,
  top to bottom by nbclient with jupyter_client's stock AsyncKernelManager and client -- what
  ``jupyter nbconvert --execute`` uses, not the course's SteadyKernelManager. The executed notebook is
  read as three readers would:
  - plain Jupyter: every cell ran, no error or stderr output, and the client received each cell's
    reply soon after the kernel sent it (a client that sleeps through a zmq wake-up waits out the
    cell's whole time limit: the hang of ``jupyter nbconvert --execute`` at Lab 12's Experiment 8);
  - a screen reader: every image output, in the cells and in the widgets' saved state, carries alt
    text that says what is plotted with a number from its result;
  - a front-end without widgets: the HTML export of the notebook without its widget state shows, for
    every slider, a picture (an ``<img>`` with its alt text) or, for the table slider, its tables.
- Then JupyterLab opens that executed notebook in the same kernel (its widgets come from the kernel,
  none from the file): every code cell shows its run, no error output, and every slider moves, its
  readout shows the new value and its plot re-draws. Screenshots: artifacts/browser/.
- Each release notebook (nothing filled in), run cell by cell past the failing tests as a student
  would: the explore cells print "Finish Task N first" instead of a traceback; only the student's own
  solution and test cells may show one.
- The start-here notebook runs clean.
- In Lab 11's release a task's first hint unfolds on a click, and a written answer can be typed into
  its cell and rendered.
- The staff companion notebooks/beyond_ppo.ipynb: its beta slider re-draws (tests/test_beyond_ppo.py
  runs it top to bottom).
"""

import html
import re
import time

import nbformat
import pytest
from dateutil.parser import isoparse
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbformat.sign import NotebookNotary

from course_staff.course import LABS as course_LABS

from . import jlab
from .conftest import REPO, server_kernel
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


WIDGET = "application/vnd.jupyter.widget-view+json"
CELL_LIMIT_S = 900            # generous: a cell that takes it has hung, the test then fails on its delay
LATE_REPLY_S = 60             # the client received a reply this long after the kernel stamped it: a missed wake-up


@pytest.fixture(scope="module", params=LABS)
def executed(request, lab_server):
    """(lab, the executed notebook, {cell index: seconds between the kernel's reply and its receipt},
    its path under the server's root). The notebook runs in a kernel of the server's session for that
    path; the file there is then the executed notebook, signed as trusted (the server's notary: same user,
    same Jupyter data folder) and without its widget state: a browser that opens it gets the widgets from
    the kernel. The kernel lives until the lab's tests are done."""
    lab = request.param
    relpath = f"source/{lab}/{lab}.ipynb"
    path = lab_server["root"] / relpath
    nb = nbformat.read(str(path), as_version=4)
    late = {}

    def received(cell, cell_index, execute_reply):      # the kernel's stamp on its reply, against now
        sent = cell.metadata.get("execution", {}).get("shell.execute_reply")
        if sent:
            late[cell_index] = time.time() - isoparse(sent).timestamp()

    with server_kernel(lab_server, relpath) as km:
        client = NotebookClient(nb, km=km, timeout=CELL_LIMIT_S, startup_timeout=300, record_timing=True,
                                on_cell_executed=received)
        assert isinstance(km, AsyncKernelManager) and km.client_class == "jupyter_client.asynchronous.AsyncKernelClient"
        client.execute()
        assert type(client.kc) is AsyncKernelClient                       # the stock client, not the course's
        client.kc.stop_channels()
        nbformat.write(nb, str(path.parent / f"{lab}.executed.ipynb"))    # to look at
        shown = nbformat.from_dict(nb)
        shown.metadata.pop("widgets", None)
        NotebookNotary().sign(shown)      # trusted, as outputs JupyterLab made itself: it draws their widgets
        nbformat.write(shown, str(path))
        yield lab, nb, late, relpath


def images(nb):
    """Every image of ``nb`` and its alt text: (where, alt, text/plain or None) for the cells' image
    outputs, and for the ``<img>`` of the slider frames in the saved widget state (HTML widgets)."""
    found = [(f"cell {i}", out.get("metadata", {}).get("image/png", {}).get("alt", ""), out["data"].get("text/plain"))
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for out in cell.outputs if "image/png" in out.get("data", {})]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for model_id, model in state.items():
        value = model.get("state", {}).get("value")
        for tag in re.findall(r"<img[^>]*>", value) if isinstance(value, str) else []:
            alt = re.search(r'alt="([^"]*)"', tag)
            found.append((f"widget {model_id}", html.unescape(alt.group(1)) if alt else "", None))
        assert not model.get("state", {}).get("outputs"), "a slider frame in an Output widget (views.base.show_slider)"
    return found


def slider_cells(nb):
    """The cells whose output is a widget with a picture or tables for front-ends without widgets (a
    slider without one is missed, and the count below fails; progress bars are widgets with text)."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            if any(WIDGET in out.get("data", {}) and {"image/png", "text/html"} & set(out["data"])
                   for out in cell.outputs)]


def test_the_stock_client_runs_the_lab_to_the_end_without_a_missed_reply(executed):
    lab, nb, late, _ = executed
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert all(nb.cells[i].execution_count for i in code), f"{lab}: a cell did not run"
    errors = {i: o for i in code for o in nb.cells[i].outputs if o.output_type == "error" or o.get("name") == "stderr"}
    assert not errors, f"{lab}: error or stderr output: {errors}"
    assert set(late) == set(code)
    slow = {i: round(s) for i, s in late.items() if s > LATE_REPLY_S}
    assert not slow, f"{lab}: the client received these cells' replies long after the kernel sent them: {slow}"


IMAGES = {"lab11": 4, "lab12": 10, "lab13": 6}        # the images each lab shows at least (plots and frames)
SLIDER_CELLS = {"lab11": 3, "lab12": 4, "lab13": 1}  # the cells of each lab that show a slider


def test_every_image_has_alt_text_with_its_result(executed):
    lab, nb, _, _ = executed
    found = images(nb)
    assert len(found) >= IMAGES[lab], f"{lab}: only {len(found)} images"
    assert any(where.startswith("widget") for where, _, _ in found), f"{lab}: no slider frame in the widget state"
    for where, alt, text in found:
        assert len(alt) > 80 and re.search(r"\d", alt), f"{lab} {where}: alt text {alt!r}"
        assert text in (None, alt), f"{lab} {where}: the text/plain is not the alt text"


def test_every_slider_shows_a_picture_in_an_html_export_without_widget_state(executed):
    lab, nb, _, _ = executed
    cells = slider_cells(nb)
    assert len(cells) == SLIDER_CELLS[lab], f"{lab}: sliders in cells {cells}"
    exporter = HTMLExporter()                     # the default template (lab), as `jupyter nbconvert --to html`
    for i in cells:
        one = nbformat.v4.new_notebook(cells=[nb.cells[i]])        # no widget state in its metadata
        body, _ = exporter.from_notebook_node(one)
        outputs = body.split('class="jp-Cell-outputWrapper"', 1)[1]
        assert "jupyter-widgets" not in outputs, f"{lab} cell {i}: the export tried to draw the widget"
        bundle = next(out for out in nb.cells[i].outputs if WIDGET in out.get("data", {})
                      and {"image/png", "text/html"} & set(out["data"]))
        if "image/png" in bundle["data"]:
            assert "data:image/png;base64," in outputs, f"{lab} cell {i}"
            assert bundle["metadata"]["image/png"]["alt"].startswith("Slider "), f"{lab} cell {i}"
        else:
            assert outputs.count("<table") >= 3, f"{lab} cell {i}: neither a picture nor the tables"


def test_the_html_export_with_the_classic_template_writes_the_alt_text(executed):
    """nbconvert's classic template writes an image's alt text from its output metadata. (This
    nbconvert's default template, lab, writes none and fills in "No description has been provided for
    this image"; JupyterLab 4.6's image renderer sets none either.)"""
    lab, nb, _, _ = executed
    body, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    alts = [re.search(r'alt="([^"]*)"', tag).group(1) for tag in re.findall(r"<img[^>]*>", body)
            if "data:image/png;base64," in tag and 'alt="' in tag]
    assert len(alts) >= len([1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                             if "image/png" in o.get("data", {}) and WIDGET not in o["data"]])     # sliders: widgets
    assert all(len(a) > 80 for a in alts)


def test_solution_notebook_shows_its_run_and_sliders_redraw(executed, lab_page):
    page, server = lab_page
    lab, nb, _, relpath = executed
    cells = nb.cells
    check_kernelspec(REPO / relpath)
    with step(page, f"{lab} (solutions): open the executed {relpath} in its kernel and wait for '(ipykernel) | Idle'", lab):
        jlab.open_notebook(page, server, relpath)
    with step(page, f"{lab} (solutions): every code cell shows its run, no error output", lab):
        assert_all_ran_clean(page, cells, f"{lab} with solutions")
    with step(page, f"{lab} (solutions): the sliders' widgets come from the kernel, one in each slider cell", lab):
        want = len(slider_cells(nb))
        try:
            page.wait_for_function(f"() => document.querySelectorAll("
                                   f"'.jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider').length >= {want}",
                                   timeout=60_000, polling=jlab.POLL_MS)
        except Exception:       # noqa: BLE001 -- say what the page shows instead
            raise AssertionError(f"{jlab.sliders(page).count()} sliders shown, {want} wanted; the widget outputs read: "
                                 f"{page.locator('.jp-OutputArea-output[data-mime-type*=widget]').all_inner_texts()[:4]}")

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


def test_beyond_ppo_beta_slider_redraws(lab_page):
    """The staff companion in JupyterLab: its first cell (the cache of results) and its slider's cell run
    without error output, then its beta slider moves and re-draws. (That the whole notebook runs top to
    bottom without error or stderr output is tests/test_beyond_ppo.py's test_notebook_runs_top_to_bottom.)"""
    page, server = lab_page
    relpath = "notebooks/beyond_ppo.ipynb"
    path, cells = notebook(relpath)
    check_kernelspec(path)
    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    slider_cell = [i for i in code if "Slider(" in cells[i].source]
    assert "results()" in cells[code[0]].source and len(slider_cell) == 1, "the first code cell reads the cache, one cell shows the slider"
    wanted = [code[0], slider_cell[0]]
    with step(page, f"beyond PPO: open {relpath}", "beyond_ppo"):
        jlab.open_notebook(page, server, relpath)
    with step(page, f"beyond PPO: run cells {wanted} (the cache, the slider) without error output", "beyond_ppo"):
        jlab.run_cells(page, wanted, RUN_ALL_TIMEOUT_S)
        prompts = jlab.prompts(page)
        assert all(re.search(r"\[\d+\]", prompts[i] or "") for i in wanted), [prompts[i] for i in wanted]
        errors = errors_by_cell(page)
        assert not errors, f"error output in cell(s) {sorted(errors)}:\n" + "\n".join(errors.values())
    with step(page, "beyond PPO: its beta slider moves, readout and plot update", "beyond_ppo"):
        found = [jlab.sliders(page).nth(k) for k in range(jlab.sliders(page).count())]
        found = [s for s in found if BETA.search(jlab.slider_state(s)["label"])]
        assert found, "no beta slider in beyond_ppo.ipynb"
        before, after = jlab.move_slider(page, found[0])
        print(f"[browser]   beta: {before['readout']} -> {after['readout']}, new plot image (cell {before['cell']})")
    jlab.show_view(page, found[0])
    print(f"[browser]   screenshot {jlab.shot(page, 'beyond_ppo-slider-beta')}")
