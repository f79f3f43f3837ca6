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


def test_a_class_runs_start_up_is_its_wall_time_beyond_its_cpu_per_grader():
    """bench_class's "plus 13-18 s per run": wall - CPU / graders of the runs whose kernels' CPU is counted
    (the unsandboxed ones of a newer file; the control: counting the sandboxed run too moves the span)."""
    old = {"size": 40, "runs": {"1": {"seconds": 94.8, "cpu": 77.2}, "2": {"seconds": 53.3, "cpu": 80.9}}}
    assert figures._class_startup(old) == "13-18"
    new = {"size": 40, "runs": {"1": {"seconds": 100.0, "cpu": 20.0, "jobs": 1},
                                "2, sandbox off": {"seconds": 50.0, "cpu": 76.0, "jobs": 2},
                                "1, sandbox off": {"seconds": 90.0, "cpu": 80.0, "jobs": 1}}}
    assert figures._class_startup(new) == "10-12"
    assert figures._span([100 - 20, 12, 10], lambda s: f"{s:.0f}") != "10-12"    # the sandboxed run left out


def test_band():
    assert figures.within_band(32, 31.9) and figures.within_band(2.2, 2.9)
    assert not figures.within_band(2.2, 3.4) and not figures.within_band(45, 31.9)     # the controls


def _notebook_text(rel):
    """A notebook's markdown, or a markdown file's text, whitespace collapsed."""
    if rel.endswith(".md"):
        return " ".join((figures.REPO / rel).read_text().split())
    cells = nbformat.read(str(figures.REPO / rel), as_version=4).cells
    return " ".join(" ".join(c.source for c in cells if c.cell_type == "markdown").split())


def test_a_notebook_quotes_a_figure_within_its_band():
    """Prose written by hand ("about 32 s") within a third of the committed measurement."""
    for rel, pattern, key in figures.BANDS:
        _within_band(rel, pattern, key)


def test_a_timing_sentence_out_of_its_band_fails(monkeypatch):
    """The control: Lab 13's "Five runs" sentence quoting three times its figure, here and on a slow laptop."""
    rows = [row for row in figures.BANDS if row[0] == "source/lab13/lab13.ipynb"]
    assert len(rows) == 2
    for rel, pattern, key in rows:
        _within_band(rel, pattern, key)
        tripled = re.sub(r"about (\d+) s", lambda m: f"about {3 * int(m.group(1))} s", _notebook_text(rel))
        with pytest.raises(AssertionError, match="more than a third"):
            _within_band(rel, pattern, key, text=tripled)


def test_every_timing_sentence_quotes_here_and_a_slow_laptop():
    """Each file's timing sentences quote a figure of this machine and what a slow laptop takes, in pairs."""
    keys = {}
    for rel, _, key in figures.BANDS:
        keys.setdefault(rel, set()).add(key)
    assert {"source/lab12/lab12.ipynb", "source/lab13/lab13.ipynb", "notebooks/00_start_here.ipynb",
            "course_staff/edition/files/README.md"} <= set(keys)
    for rel, ks in keys.items():
        assert {k + ".slow" for k in ks if not k.endswith(".slow")} == {k for k in ks if k.endswith(".slow")}, rel
        assert ks <= set(figures.TIMINGS), rel


def test_the_documents_timing_figures_are_those_of_the_results():
    """README's and the TA guide's timing spans say what benchmarks/results/bench.json holds (`make figures`)."""
    assert not figures.timings_out_of_step(), figures.timings_out_of_step()
    quoted = {m.group("key") for rel in ("README.md", "docs/ta_guide.md")
              for m in figures.SPAN.finditer((figures.REPO / rel).read_text())}
    assert {"bench.run_all_longest", "bench.run_all_longest.slow", "bench.run_all_lab13.default"} <= quoted


def test_a_timing_span_out_of_step_is_found(tmp_path):
    """The control: the TA guide with Lab 12's Run All quoted as 99 s."""
    for rel in figures.DOCUMENTS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((figures.REPO / rel).read_text())
    guide = tmp_path / "docs" / "ta_guide.md"
    guide.write_text(re.sub(r"(<!-- fig:bench\.run_all_lab12 -->)[^<]*", r"\g<1>99 s", guide.read_text()))
    assert [(rel, key, quoted) for rel, key, quoted, _ in figures.timings_out_of_step(tmp_path)] == \
        [("docs/ta_guide.md", "bench.run_all_lab12", "99 s")]


def _within_band(rel, pattern, key, text=None):
    found = re.findall(pattern, _notebook_text(rel) if text is None else text)
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


def test_the_stale_report_names_each_stale_figure_and_fails_nothing(tmp_path):
    # the folder passed, not provenance.RESULTS patched: make test works out its own report meanwhile
    for name in provenance.REMAKE:
        data = json.loads((provenance.REPO / "benchmarks" / "results" / name).read_text())
        now = provenance.inputs(name, tests=data.get("ledger_tests"))
        data["fingerprint"], data["inputs"] = "old", {**now, "course_utils/tinylm.py": "0" * 16}
        (tmp_path / name).write_text(json.dumps(data))
    lines = provenance.stale_report(folder=tmp_path)
    stale = [ln for ln in lines if "is stale: changed since:" in ln]
    assert len(stale) == 4 and all(ln.endswith("changed since: course_utils/tinylm.py (re-measure: "
                                               + provenance.REMAKE[ln.split()[0].split("/")[-1]] + ")")
                                   for ln in stale), lines


# ----------------------------------------------------------------------------- the science table's provenance
def test_the_science_tables_files_are_what_its_run_reads():
    """Derived from the code (provenance.science_files): the experiments and what they import, lazily too,
    the notebooks they load, the weights they read, the tests the ledger ran; nothing it does not run."""
    files = provenance.science_files(tests=["tests/test_claims.py::test_x"])
    assert {"benchmarks/science.py", "benchmarks/criteria.py", "benchmarks/science_lab12.py",
            "benchmarks/science_beyond.py", "course_utils/tinylm.py", "course_utils/tree_optimum.py",
            "course_staff/beyond/methods.py", "source/lab11/lab11.ipynb", "source/lab12/lab12.ipynb",
            "course_utils/data/sft.pt", "tests/test_claims.py", "tests/conftest.py"} <= set(files), files
    assert "course_utils/views/critic.py" in files, "imported inside a function of science_lab12 (a lazy import)"
    experiments = provenance.science_files()
    assert set(experiments) < set(files) and "tests/test_claims.py" not in experiments
    assert not {"benchmarks/bench.py", "benchmarks/figures.py", "benchmarks/provenance.py", "course_staff/grading/sandbox.py",
                "course_staff/beyond/data/beyond_ppo_results.json", "notebooks/beyond_ppo.ipynb"} & set(experiments)


def test_a_science_run_records_its_machine_and_the_files_it_read():
    """What `make science` writes beside its figures (science.main: the record made as the run starts)."""
    from benchmarks import science
    ledger = ["tests/test_claims.py::test_x"]
    record = {**science.machine_record(), **science.provenance_record(ledger)}
    assert {"avx2", "avx512"} == set(record["cpu_flags"]) and record["capability"] and record["threads"] >= 1
    assert "CPU flags:" in record["machine"] and "torch kernels" in record["machine"]
    assert record["commit"] == provenance.commit() and record["ledger_tests"] == ledger
    assert record["inputs"] == provenance.inputs("science.json", tests=ledger)
    assert provenance.changed_since("science.json", record) == []


def _raw(kernels, summary):
    """A raw output of `python -m benchmarks.science --out` as the writer before provenance made it."""
    return {"seeds": [0, 1, 2, 3, 4], "jobs": 2, "short": 1, "wall_s": 1.0, "cpu_s": 2.0, "load": 1.2,
            "machine": {"cpu": "Some CPU", "cores": 2, "torch_threads": 1, "kernels": kernels, "load": 1.2},
            "summary": summary, "criteria": [{"experiment": "e", "name": "c", "values": [1.0], "met": [True],
                                              "controls": {}, "controls_fail": True, "claim": "x", "fmt": "{}",
                                              "threshold": ">= 0"}],
            "measured": {}, "tests_passed": ["tests/test_claims.py::test_x"], "results": []}


def test_a_raw_run_is_written_with_the_provenance_of_the_tree_that_ran_it(tmp_path):
    from benchmarks import science
    native, default = tmp_path / "native.json", tmp_path / "default.json"
    native.write_text(json.dumps(_raw("AVX2", ["claims: 1/1 backed", "science: 5/5 seeds meet every criterion"])))
    default.write_text(json.dumps(_raw("DEFAULT", ["claims: 1/1 backed", "science: 4/5 seeds meet every criterion"])))
    out = tmp_path / "science.json"
    record = science.from_raw(native, provenance.REPO, beside=default, out=out)
    assert json.loads(out.read_text()) == record
    assert record["commit"] == provenance.commit() and "--from-raw" in record["converted"]
    assert record["command"].startswith("python -m benchmarks.science --jobs 2 --no-measure (rebuilt")
    assert record["ledger_tests"] == ["tests/test_claims.py::test_x"] and "tests/test_claims.py" in record["inputs"]
    assert provenance.changed_since("science.json", record) == []
    assert record["default kernels"]["summary"][-1] == "science: 4/5 seeds meet every criterion"
    assert record["capability"] == "AVX2" and record["load"] == [None, 1.2]
    text = science.markdown(out)
    assert "science: 5/5 seeds" in text and "science: 4/5 seeds" in text and f"at commit {record['commit']}" in text
    changed = {**record, "inputs": {**record["inputs"], "benchmarks/science_lab12.py": "0" * 16}, "fingerprint": "old"}
    assert provenance.changed_since("science.json", changed) == ["benchmarks/science_lab12.py"]
    default.write_text(json.dumps(_raw("AVX2", ["science: 5/5 seeds meet every criterion"])))
    with pytest.raises(SystemExit, match="not under ATEN_CPU_CAPABILITY=default"):
        science.from_raw(native, provenance.REPO, beside=default, out=out)


def test_verdict_says_within_or_over_its_budget_as_the_row_was_judged():
    """The control is the second row: over its budget, it must not read "within"."""
    assert figures._verdict({"ok": True, "budget": 15, "median": 14.7}) == "within its 15-minute budget"
    assert figures._verdict({"ok": False, "budget": 15, "median": 15.2}) == "over its 15-minute budget"
    assert figures._verdict({"ok": True, "budget": 7.5, "median": 3}) == "within its 7.5-minute budget"
    row = figures._the_row(figures.results("make_test.json"), "`make test`")
    assert figures.figure("make_test.verdict").startswith("within" if row["ok"] else "over")
