"""Driving JupyterLab 4 from Playwright: open a notebook, run it, read its outputs, move its sliders.

Every action a test takes is wrapped in ``step(page, "what")``: a failure names the step and leaves a
screenshot under artifacts/browser/.
"""

import contextlib
import re
import time
from pathlib import Path

import nbformat

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
STDERR = "application/vnd.jupyter.stderr"
IDLE = re.compile(r"\(ipykernel\) \| Idle")
# how often page.wait_for_function asks (ms): its default asks on every animation frame, which keeps
# headless chromium drawing 60 frames a second for as long as a cell runs
POLL_MS = 100


def shot(page, name):
    """Save a screenshot of the page as artifacts/browser/<name>.png; return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@contextlib.contextmanager
def step(page, name, tag="step"):
    """Announce a step; on failure re-raise naming it, with a screenshot of the page."""
    __tracebackhide__ = True
    t0 = time.monotonic()
    print(f"[browser] {name} ...", flush=True)
    try:
        yield
    except Exception as exc:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"FAILED-{tag}-{name}")[:120]
        try:
            where = f"screenshot: {shot(page, safe)}"
        except Exception as shot_exc:       # the page may be gone
            where = f"no screenshot ({shot_exc})"
        raise AssertionError(f"browser step failed: {name}\n{where}\n{type(exc).__name__}: {exc}") from exc
    print(f"[browser] {name}: ok in {time.monotonic() - t0:.1f} s", flush=True)


# ---------------------------------------------------------------- opening and waiting

def open_notebook(page, server, relpath, timeout_s=90):
    """Open ``relpath`` (relative to the server's root) and wait until its kernel is really idle. In a page
    where JupyterLab runs already, the notebook opens in it (the file browser's way: the app is not
    loaded again); otherwise JupyterLab loads with it (its URL)."""
    if page.url.startswith(f"{server['url']}/lab") and page.evaluate("() => !!window.jupyterapp"):
        close_notebooks(page)
        page.evaluate("async path => { await window.jupyterapp.commands.execute('docmanager:open', {path}); }",
                      relpath)
    else:
        page.goto(f"{server['url']}/lab/tree/{relpath}?token={server['token']}&reset")
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=timeout_s * 1000)
    try:
        wait_kernel_idle(page, 20)
    except Exception:
        # a notebook without kernelspec metadata asks which kernel to start
        dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
        if dialog.count():
            print("[browser] the notebook asked which kernel to start: Python 3 (ipykernel)")
            dialog.locator("button", has_text="Select").click()
        wait_kernel_idle(page, timeout_s)
    # more room for the notebook: collapse the file browser
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current.count():
        current.first.click()


_CLOSE_JS = """() => {
  const app = window.jupyterapp;
  if (!app) return 0;
  const open = Array.from(app.shell.widgets('main'));
  open.forEach(w => w.dispose());          // no "save your changes?" dialog: the tests' copies are thrown away
  return open.length;
}"""


def close_notebooks(page):
    """Close every document open in the page's JupyterLab (their kernels keep running)."""
    try:
        page.evaluate(_CLOSE_JS)
    except Exception as exc:     # noqa: BLE001 -- a page that is gone has nothing open
        print(f"[browser] could not close the open documents: {exc}")


def status_text(page):
    return page.locator(".jp-StatusBar-Widget").all_inner_texts()


def wait_kernel_idle(page, timeout_s=60):
    """The execution indicator reads idle while the kernel still starts: wait for the status bar's
    "(ipykernel) | Idle" instead."""
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.jp-StatusBar-Widget'))
                      .some(e => /\\(ipykernel\\) \\| Idle/.test(e.textContent))""",
        timeout=timeout_s * 1000, polling=POLL_MS)


_PROMPTS_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  return Array.from(nb.querySelectorAll(':scope > .jp-Cell, .jp-WindowedPanel-viewport > .jp-Cell'))
    .map(c => c.classList.contains('jp-CodeCell')
              ? (c.querySelector('.jp-InputArea-prompt') || {textContent: ''}).textContent.trim()
              : null);
}"""


def prompts(page):
    """Per cell: the input prompt of a code cell ("[ ]:", "[*]:", "[7]:"), None for other cells."""
    return page.evaluate(_PROMPTS_JS)


def wait_until_done(page, timeout_s):
    """Wait until no cell is queued or running, some cell ran, and the kernel is idle (held for 1 s)."""
    deadline = time.monotonic() + timeout_s
    calm_since = None
    while time.monotonic() < deadline:
        ps = [p for p in prompts(page) if p is not None]
        busy = any("*" in p for p in ps)
        ran = any(re.search(r"\[\d+\]", p) for p in ps)
        idle = any(IDLE.search(t) for t in status_text(page))
        if ran and idle and not busy:
            calm_since = calm_since or time.monotonic()
            if time.monotonic() - calm_since >= 1.0:
                return
        else:
            calm_since = None
        time.sleep(0.25)
    running = [i for i, p in enumerate(prompts(page)) if p and "*" in p]
    raise TimeoutError(f"still running after {timeout_s} s (cells queued or running: {running}; "
                       f"status bar: {status_text(page)})")


# ---------------------------------------------------------------- running

def menu(page, top, item):
    """Click a main-menu entry, e.g. menu(page, "Run", "Run All Cells")."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel",
                 has_text=re.compile(rf"^{re.escape(item)}$")).first.click()


def run_all(page, timeout_s):
    """Run → Run All Cells, then wait until it has finished (it stops at the first error)."""
    menu(page, "Run", "Run All Cells")
    wait_until_done(page, timeout_s)


def cells(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def select_cell(page, i):
    """Select cell ``i`` in command mode: a click on its prompt does not enter the editor."""
    cell = cells(page).nth(i)
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Escape")


def run_cell(page, i, last, timeout_s):
    """Select cell ``i`` in command mode and run it (Shift+Enter; Ctrl+Enter on the ``last`` cell, where
    Shift+Enter would append a new one); for a code cell wait until its prompt shows a run."""
    select_cell(page, i)
    press_run(page, i, last, prompts(page)[i] is not None, timeout_s)


def press_run(page, i, last, code, timeout_s):
    """Run the selected cell ``i`` (Shift+Enter, which selects the next cell; Ctrl+Enter on the ``last``);
    for a ``code`` cell wait until its prompt shows a run."""
    page.keyboard.press("Control+Enter" if last else "Shift+Enter")
    if not code:
        return
    page.wait_for_function(
        """i => {
             const c = document.querySelectorAll(
               '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i];
             const p = c.querySelector('.jp-InputArea-prompt').textContent;
             return /\\[\\d+\\]/.test(p);
           }""",
        arg=i, timeout=timeout_s * 1000, polling=POLL_MS)


def run_each_cell(page, timeout_per_cell_s):
    """Run the cells one by one from the top, going on after errors, as a student who keeps pressing
    Shift+Enter does (Run All would stop at the first failing test cell): the first cell selected, then
    Shift+Enter again and again, each time once the code cell before has shown its run. Folded code is
    unfolded first (View > Expand All Code): a folded cell shows no prompt to wait on."""
    menu(page, "View", "Expand All Code")
    code = [p is not None for p in prompts(page)]
    n = len(code)
    select_cell(page, 0)
    for i in range(n):
        press_run(page, i, i == n - 1, code[i], timeout_per_cell_s)
    wait_until_done(page, timeout_per_cell_s)


def run_cells(page, indices, timeout_per_cell_s):
    """Run the cells ``indices`` only, in that order, as a reader who runs a notebook's set-up cell and
    then jumps to a plot does."""
    n = len(prompts(page))
    for i in indices:
        run_cell(page, i, i == n - 1, timeout_per_cell_s)
    wait_until_done(page, timeout_per_cell_s)


# ---------------------------------------------------------------- reading outputs

_OUTPUTS_JS = """() => {
  const cells = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');
  return Array.from(cells).map(c => Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => ({
      mime: o.getAttribute('data-mime-type') || '',
      text: o.innerText || '',
      imgs: o.querySelectorAll('img').length,
  })));
}"""


def outputs(page):
    """Per cell, its rendered outputs: [{"mime", "text", "imgs"}, ...]."""
    return page.evaluate(_OUTPUTS_JS)


def is_error(out):
    """A traceback or anything else written to stderr (errors render with the stderr mime type)."""
    return out["mime"] == STDERR


def describe(outs, head=400, tail=1200):
    """The text of a cell's outputs for failure messages: its start and its end (where a traceback
    names the exception)."""
    text = "\n".join(o["text"] for o in outs)
    return text if len(text) <= head + tail else f"{text[:head]}\n[...]\n{text[-tail:]}"


def notebook_cells(path):
    """The cells of a notebook file (same order as in the page), with tags and nbgrader metadata."""
    return nbformat.read(str(path), as_version=4).cells


def tags(cell):
    return set(cell.get("metadata", {}).get("tags", []))


def grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


# ---------------------------------------------------------------- sliders

_SLIDER_JS = """el => {
  const cell = el.closest('.jp-Cell');
  const cells = Array.from(document.querySelectorAll(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell'));
  const view = el.closest('.widget-vbox') || cell;   // the slider's own view: slider + text + plot
  const h = el.querySelector('.noUi-handle');
  return {
    label: (el.querySelector('.widget-label') || {innerText: ''}).innerText.trim(),
    readout: (el.querySelector('.widget-readout') || {innerText: ''}).innerText.trim(),
    now: h ? h.getAttribute('aria-valuenow') : null,
    max: h ? h.getAttribute('aria-valuemax') : null,
    cell: cells.indexOf(cell),
    imgs: view ? Array.from(view.querySelectorAll('.widget-html img')).map(i => i.src) : [],   // a frame: an <img> in an HTML widget
    alts: view ? Array.from(view.querySelectorAll('.widget-html img')).map(i => i.alt) : [],
    still: cell ? cell.querySelectorAll('.jp-RenderedImage img').length : 0,   // the static picture: not shown beside the widget
    html: view ? Array.from(view.querySelectorAll('.widget-html')).map(e => e.innerText).join('\\n') : '',
  };
}"""


def sliders(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .widget-slider")


def slider_state(slider):
    """{"label", "readout", "now", "max", "cell", "imgs": [src of each plot image in the slider's view],
    "alts": [their alt texts], "still": images of the cell outside widgets (the static fallback),
    "html": text of the HTML widgets in its view}. The view is the VBox holding the slider."""
    return slider.evaluate(_SLIDER_JS)


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def move_slider(page, slider, timeout_s=15):
    """Step a slider once with the keyboard (right, or left when at its maximum) and wait until its
    readout shows a new value and its view re-draws: a plot image gets a new src or, for a view
    without images (a table), its HTML changes. Returns (before, after)."""
    before = slider_state(slider)
    now, top = _number(before["now"]), _number(before["max"])
    key = "ArrowLeft" if now is not None and top is not None and now >= top else "ArrowRight"
    slider.scroll_into_view_if_needed()
    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press(key)
    deadline = time.monotonic() + timeout_s
    while True:
        after = slider_state(slider)
        redrawn = (after["imgs"] != before["imgs"]) if before["imgs"] else (after["html"] != before["html"])
        if after["readout"] != before["readout"] and redrawn and (after["imgs"] or not before["imgs"]):
            break
        if time.monotonic() > deadline:
            raise AssertionError(
                f"slider {before['label']!r} after {key}: readout {before['readout']!r} -> "
                f"{after['readout']!r}; {len(before['imgs'])} -> {len(after['imgs'])} plot images, "
                f"new image: {after['imgs'] != before['imgs']}, new text: {after['html'] != before['html']}")
        time.sleep(0.1)
    old, new = _number(before["readout"]), _number(after["readout"])
    if old is not None and new is not None:
        assert (new > old) == (key == "ArrowRight"), \
            f"slider {before['label']!r}: {key} moved the readout from {old} to {new}"
    return before, after


_TO_TOP_JS = """el => {
  el.scrollIntoView({block: 'start'});
  let p = el.parentElement;                  // leave a margin above it
  while (p && p.scrollHeight <= p.clientHeight) p = p.parentElement;
  if (p) p.scrollTop -= 40;
}"""


def scroll_to_top(page, locator):
    """Scroll the notebook so that ``locator``'s element sits near the top of the page."""
    locator.evaluate(_TO_TOP_JS)
    page.wait_for_timeout(300)


def show_view(page, slider):
    """Scroll so that the slider's view (slider, text, plot) starts near the top of the notebook."""
    slider.evaluate(f"el => ({_TO_TOP_JS})(el.closest('.widget-vbox') || el)")
    page.wait_for_timeout(300)
