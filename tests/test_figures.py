"""The measured figures: documents quote them from the results files (benchmarks/figures.py), a notebook
within a band, and a figure whose code changed is named as stale, never failed (benchmarks/provenance.py)."""

import json
import re
import subprocess

import nbformat
import pytest

from benchmarks import figures, provenance


def test_every_marked_figure_can_be_rendered_from_its_results_file():
    """What README, the TA guide and benchmarks/README quote between <!-- fig:... --> marks, `make figures`
    renders from benchmarks/results (the measuring targets run it after a run; a document out of step with
    the results is a warning in `make test`'s summary, as a stale figure is)."""
    for rel in figures.DOCUMENTS:
        text = (figures.REPO / rel).read_text()
        keys = [m.group("key") for m in figures.SPAN.finditer(text)]
        unknown = sorted(set(keys) - set(figures.FIGURES))
        assert not unknown, f"{rel} marks figures that benchmarks/figures.py does not know: {unknown}"
        assert figures.SPAN.findall(figures.render(text)) and figures.render(figures.render(text)) == figures.render(text)
    quoted = {m.group("key") for rel in figures.DOCUMENTS
              for m in figures.SPAN.finditer((figures.REPO / rel).read_text())}
    assert {"make_test.duration", "make_test.passed", "bench.table", "science.table", "bench_class.table"} <= quoted


def test_a_span_is_rendered_from_the_results():
    data = figures.results("make_test.json")
    text = "took <!-- fig:make_test.passed -->1 passed<!-- /fig --> and <!-- fig:make_test.duration -->x<!-- /fig -->."
    out = figures.render(text)
    passed = re.search(r"\d+ passed", data["rows"][0]["note"]).group(0)
    minutes = data["rows"][0]["median"]
    assert f"-->{passed}<!--" in out and f"-->{int(minutes)} min " in out
    assert figures.render(out) == out, "rendering twice changes nothing"


def test_band():
    assert figures.within_band(32, 31.9) and figures.within_band(2.2, 2.9)
    assert not figures.within_band(2.2, 3.4) and not figures.within_band(45, 31.9)     # the controls


def _notebook_text(rel):
    cells = nbformat.read(str(figures.REPO / rel), as_version=4).cells
    return " ".join(" ".join(c.source for c in cells if c.cell_type == "markdown").split())


def test_a_notebook_quotes_a_figure_within_its_band():
    """Prose written by hand ("about 32 s") within a third of the committed measurement."""
    for rel, pattern, key in figures.BANDS:
        _within_band(rel, pattern, key)


def _within_band(rel, pattern, key):
    found = re.findall(pattern, _notebook_text(rel))
    assert found, f"{rel} no longer says {pattern!r}: update benchmarks/figures.py's BANDS with the new sentence"
    measured = float(figures.figure(key).split()[0])
    for quoted in map(float, found):
        assert figures.within_band(quoted, measured), (
            f"{rel} says about {quoted:g} s where benchmarks/results measured {measured:g} s (more than a third "
            f"apart): say about {measured:.2g} s")


# ----------------------------------------------------------------------------- staleness
@pytest.fixture
def measured(tmp_path, monkeypatch):
    """A small repository whose figure "x.json" measured pkg/ and a notebook."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text('def f(x):\n    """doc"""\n    total = x + 1\n    return total\n')
    (tmp_path / "pkg" / "b.py").write_text("B = 2\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("prose"), nbformat.v4.new_code_cell("y = 1")])
    nbformat.write(nb, str(tmp_path / "lab.ipynb"))
    monkeypatch.setitem(provenance.MEASURED, "x.json", ["pkg", "lab.ipynb"])
    return tmp_path


def test_a_figure_is_stale_when_the_code_it_measured_changed(measured):
    data = {"fingerprint": provenance.fingerprint("x.json", measured), "inputs": provenance.inputs("x.json", measured)}
    assert provenance.changed_since("x.json", data, measured) == []
    a = measured / "pkg" / "a.py"
    a.write_text(a.read_text().replace('"""doc"""', '"""other words"""') + "# a comment\n")
    nb = nbformat.read(str(measured / "lab.ipynb"), as_version=4)
    nb.cells[0].source = "other prose"
    nbformat.write(nb, str(measured / "lab.ipynb"))
    assert provenance.changed_since("x.json", data, measured) == [], "comments, docstrings and prose change no figure"
    a.write_text(a.read_text().replace("total", "result"))                  # a renamed local variable
    assert provenance.changed_since("x.json", data, measured) == ["pkg/a.py"]


def test_the_files_changed_since_are_named_from_the_commit_when_the_results_record_no_digests(measured):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=measured, check=True,
                       capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "measured")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=measured, capture_output=True,
                          text=True).stdout.strip()
    data = {"commit": head, "fingerprint": "an older one"}
    (measured / "pkg" / "b.py").write_text("B = 2  # two\n")                # a comment: not a change
    assert provenance.changed_since("x.json", data, measured) in ([], ["(torch's version)"])
    (measured / "pkg" / "b.py").write_text("B = 3\n")
    (measured / "pkg" / "c.py").write_text("C = 1\n")                        # a new file it would measure
    assert provenance.changed_since("x.json", data, measured) == ["pkg/b.py", "pkg/c.py"]


def test_the_stale_report_names_each_stale_figure_and_fails_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "RESULTS", tmp_path)
    for name in ("bench.json", "make_test.json", "bench_class.json"):
        data = json.loads((provenance.REPO / "benchmarks" / "results" / name).read_text())
        data["fingerprint"], data["inputs"] = "old", {**provenance.inputs(name), "course_utils/tinylm.py": "0" * 16}
        (tmp_path / name).write_text(json.dumps(data))
    lines = provenance.stale_report()
    stale = [ln for ln in lines if "is stale: changed since:" in ln]
    assert len(stale) == 3 and all(ln.endswith("changed since: course_utils/tinylm.py (re-measure: "
                                               + provenance.REMAKE[ln.split()[0].split("/")[-1]] + ")")
                                   for ln in stale), lines
