"""benchmarks.science_verify re-stamps the science table only when seed 0 reruns identical in both settings.

The reruns are stood in for (a rerun is minutes): each writes the figures the test hands it, the
committed table's own for seed 0, or those with one figure moved (the controls).
"""

import json
import types

import pytest

from benchmarks import claims, provenance, science, science_verify


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A copy of the committed table, on a machine with its kernels, and its seed 0's figures."""
    record = json.loads(science.RESULTS.read_text())
    path = tmp_path / "science.json"
    path.write_text(json.dumps(record))
    monkeypatch.setattr(provenance, "capability", lambda: record["capability"])
    monkeypatch.setattr(claims, "run_tests", lambda ids: set(ids))    # the ledger's tests pass (run: ~30 s)
    native = record["results"][record["seeds"].index(0)]
    by_name = science.criteria_by_name()
    default = {}
    for c in record[science.DEFAULT_LABEL]["criteria"]:
        crit = by_name[f"{c['experiment']}.{c['name']}"]
        figures = default.setdefault(c["experiment"], {})
        figures[crit.key] = c["values"][0]
        for label, key in crit.controls:
            figures[key] = c["controls"][label]["values"][0]
    return path, native, default


def rerunning(monkeypatch, native, default):
    """science_verify.rerun writing ``native`` or ``default`` (by its default_kernels argument)."""
    def rerun(seed, out, default_kernels=False):
        out.write_text(json.dumps(default if default_kernels else native))
        return types.SimpleNamespace(wait=lambda: 0)
    monkeypatch.setattr(science_verify, "rerun", rerun)


def test_identical_figures_restamp_the_table(table, monkeypatch):
    path, native, default = table
    rerunning(monkeypatch, native, default)
    ok, lines = science_verify.verify(path)
    assert ok, lines
    record = json.loads(path.read_text())
    assert record["inputs"] == provenance.inputs("science.json", provenance.REPO, record["ledger_tests"])
    assert record["verified"][-1]["commit"] == provenance.commit()
    assert f"The ledger then: `{record['verified'][-1]['claims']}`" in science.markdown(path), \
        "the README's table shows the ledger as the re-stamp judged it (it may have grown since the run)"


def test_the_ledgers_tests_are_run_now_and_recorded(table, monkeypatch):
    """A test the ledger cites since the table was made is run, as every test it cites, and recorded."""
    path, native, default = table
    rerunning(monkeypatch, native, default)
    record = json.loads(path.read_text())
    new = claims.cited_tests()[0]
    record["tests_passed"].remove(new)                          # the table's run never ran it
    path.write_text(json.dumps(record))
    ran = []
    monkeypatch.setattr(claims, "run_tests", lambda ids: ran.extend(ids) or set(ids))
    ok, lines = science_verify.verify(path)
    assert ok, lines
    assert ran == claims.cited_tests() and new in json.loads(path.read_text())["tests_passed"]


def test_control_a_ledger_test_that_fails_now_leaves_the_table_as_it_was(table, monkeypatch):
    path, native, default = table
    rerunning(monkeypatch, native, default)
    failing = claims.cited_tests()[0]
    monkeypatch.setattr(claims, "run_tests", lambda ids: set(ids) - {failing})
    before = path.read_text()
    ok, lines = science_verify.verify(path)
    assert not ok and "not all backed" in lines[0]
    assert path.read_text() == before


@pytest.mark.parametrize("setting", ["native", "default"])
def test_control_one_moved_figure_leaves_the_table_as_it_was(table, monkeypatch, setting):
    path, native, default = table
    figures = json.loads(json.dumps(native if setting == "native" else default))
    exp = next(iter(figures))
    key = next(k for k, v in figures[exp].items() if isinstance(v, float))
    figures[exp][key] += 1e-12                                   # the last bits of one figure
    rerunning(monkeypatch, figures if setting == "native" else native, figures if setting == "default" else default)
    before = path.read_text()
    ok, lines = science_verify.verify(path)
    assert not ok and repr(figures[exp][key]) in "\n".join(lines)      # the moved figure is named
    assert path.read_text() == before


def test_another_machines_kernels_are_not_compared(table, monkeypatch):
    path, native, default = table
    rerunning(monkeypatch, native, default)
    monkeypatch.setattr(provenance, "capability", lambda: "AVX2")
    ok, lines = science_verify.verify(path)
    assert not ok and "cannot be compared" in lines[0]


def test_a_tree_that_changes_during_the_reruns_is_not_stamped(table, monkeypatch):
    path, native, default = table
    rerunning(monkeypatch, native, default)
    stamps = iter([{"commit": "a"}, {"commit": "b"}])               # the code as the reruns start, then at the end
    monkeypatch.setattr(science, "provenance_record", lambda ledger: next(stamps))
    before = path.read_text()
    ok, lines = science_verify.verify(path)
    assert not ok and "changed while" in lines[0]
    assert path.read_text() == before
