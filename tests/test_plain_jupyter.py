"""Every lab in plain Jupyter, as a student's or a TA's own tools run them (slow: each lab runs once).

Each instructor notebook (source/, every solution in) is executed top to bottom by nbclient with
jupyter_client's stock AsyncKernelManager -- what ``jupyter nbconvert --execute`` uses, not the
course's SteadyKernelManager -- and the executed notebook is then read as three readers would:

- plain Jupyter: every cell ran, and the client received each cell's reply soon after the kernel sent
  it (a client that sleeps through a zmq wake-up waits out the cell's whole time limit: the hang of
  ``jupyter nbconvert --execute`` at Lab 12's Experiment 8);
- a screen reader: every image output, in the cells and in the widgets' saved state, carries alt text
  that says what is plotted with a number from its result;
- a front-end without widgets: the HTML export of the notebook without its widget state shows, for
  every slider, a picture (an ``<img>`` with its alt text) or, for the table slider, its tables.
"""

import html
import re
import time

import nbformat
import pytest
from dateutil.parser import isoparse
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from course_staff.testbed import harness as h

pytestmark = pytest.mark.slow
LABS = h.LABS
WIDGET = "application/vnd.jupyter.widget-view+json"
CELL_LIMIT_S = 900            # generous: a cell that takes it has hung, the test then fails on its delay
LATE_REPLY_S = 60             # the client received a reply this long after the kernel stamped it: a missed wake-up


@pytest.fixture(scope="module", params=LABS)
def executed(request, tmp_path_factory):
    """(lab, the executed notebook, {cell index: seconds between the kernel's reply and its receipt})."""
    lab = request.param
    nb = nbformat.read(str(h.REPO / "source" / lab / f"{lab}.ipynb"), as_version=4)
    late = {}

    def received(cell, cell_index, execute_reply):      # the kernel's stamp on its reply, against now
        sent = cell.metadata.get("execution", {}).get("shell.execute_reply")
        if sent:
            late[cell_index] = time.time() - isoparse(sent).timestamp()

    client = NotebookClient(nb, timeout=CELL_LIMIT_S, kernel_name="python3", kernel_manager_class=AsyncKernelManager,
                            record_timing=True, on_cell_executed=received,
                            resources={"metadata": {"path": str(tmp_path_factory.mktemp(lab))}})
    assert client.kernel_manager_class is AsyncKernelManager          # the stock manager, not the course's
    client.execute()
    nbformat.write(nb, str(tmp_path_factory.getbasetemp() / f"{lab}.executed.ipynb"))      # to look at
    return lab, nb, late


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
    lab, nb, late = executed
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert all(nb.cells[i].execution_count for i in code), f"{lab}: a cell did not run"
    assert set(late) == set(code)
    slow = {i: round(s) for i, s in late.items() if s > LATE_REPLY_S}
    assert not slow, f"{lab}: the client received these cells' replies long after the kernel sent them: {slow}"


IMAGES = {"lab11": 4, "lab12": 10, "lab13": 6}        # the images each lab shows at least (plots and frames)
SLIDER_CELLS = {"lab11": 3, "lab12": 4, "lab13": 1}  # the cells of each lab that show a slider


def test_every_image_has_alt_text_with_its_result(executed):
    lab, nb, _ = executed
    found = images(nb)
    assert len(found) >= IMAGES[lab], f"{lab}: only {len(found)} images"
    assert any(where.startswith("widget") for where, _, _ in found), f"{lab}: no slider frame in the widget state"
    for where, alt, text in found:
        assert len(alt) > 80 and re.search(r"\d", alt), f"{lab} {where}: alt text {alt!r}"
        assert text in (None, alt), f"{lab} {where}: the text/plain is not the alt text"


def test_every_slider_shows_a_picture_in_an_html_export_without_widget_state(executed):
    lab, nb, _ = executed
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
    lab, nb, _ = executed
    body, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    alts = [re.search(r'alt="([^"]*)"', tag).group(1) for tag in re.findall(r"<img[^>]*>", body)
            if "data:image/png;base64," in tag and 'alt="' in tag]
    assert len(alts) >= len([1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                             if "image/png" in o.get("data", {}) and WIDGET not in o["data"]])     # sliders: widgets
    assert all(len(a) > 80 for a in alts)
