"""benchmarks/bench.py's own logic (no timing): the kernel probe's parser, the budget rule, the report."""

import json
import subprocess
import sys

import pytest

from benchmarks import bench


def _stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_probe_parses_one_line():
    peak, cpu, children = bench.parse_probe([_stdout("bench-probe 352256 2.71 40.5\n")])
    assert peak == 344.0 and cpu == 2.71 and children == 40.5


def test_the_probe_cell_prints_what_the_parser_reads():
    """The probe's own code, run here: its line parses, and a reaped child's CPU is in the third field."""
    import contextlib
    import io
    import subprocess
    import sys

    def probe():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(bench._PROBE, {})
        return bench.parse_probe([_stdout(out.getvalue())])

    _, _, before = probe()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3 * 10 ** 6): x += i"], check=True)
    _, cpu, after = probe()
    assert cpu > 0 and after - before > 0.05, "a child's CPU, once reaped, counts in the probe"


@pytest.mark.parametrize("outputs", [
    # the shape that crashed `autograde lab11` on an Intel machine: one print, two stream messages
    # (the kernel flushed between print's writes), the first holding one field
    [_stdout("bench-probe 352256"), _stdout(" 2.71 0.5\n")],
    [_stdout("bench-probe "), _stdout("352256 "), _stdout("2."), _stdout("71 0"), _stdout(".5\n")],
    # stderr and other outputs around it, and text as a list of strings (nbformat allows both)
    [{"output_type": "stream", "name": "stderr", "text": "UserWarning: something\n"},
     _stdout(["bench-probe 352256 ", "2.71 0.5\n"])],
    [_stdout("a line the notebook's last cell left 1 2\n"), _stdout("bench-probe 352256 2.71 0.5\n"),
     {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}}],
])
def test_probe_parses_split_and_noisy_outputs(outputs):
    assert bench.parse_probe(outputs) == (344.0, 2.71, 0.5)


def test_probe_without_peak_memory():
    """No /proc/self/status (not Linux): the peak is unknown, the CPU time still read."""
    assert bench.parse_probe([_stdout("bench-probe -1 0.5 0.0\n")]) == (None, 0.5, 0.0)


@pytest.mark.parametrize("outputs", [[], [_stdout("")], [_stdout("352256 2.71 0.5\n")],
                                     [_stdout("bench-probe 352256 2.71\n")],         # the children's field missing
                                     [{"output_type": "error", "ename": "OSError", "evalue": "", "traceback": []}]])
def test_probe_without_its_line_says_so(outputs):
    with pytest.raises(ValueError, match="printed no 'bench-probe"):
        bench.parse_probe(outputs)


def test_budget_rule():
    """Met as it stands on a CPU with AVX2 only; a timing within half of it where the CPU has AVX-512;
    memory and ratios judged as they stand everywhere."""
    avx2, avx512 = {"avx2": True, "avx512": False}, {"avx2": True, "avx512": True}
    assert bench.judged_budget(3, "s", avx2) == 3
    assert bench.judged_budget(3, "s", avx512) == 1.5
    assert bench.judged_budget(600, "ms", avx512) == 300
    assert bench.judged_budget(1024, "MiB", avx512) == 1024
    assert bench.judged_budget(1.3, "x", avx512) == 1.3
    assert bench.judged_budget(None, "s", avx512) is None


def test_report_judges_by_the_rule(capsys):
    report = bench.Report(flags={"avx2": True, "avx512": True})
    report.add("a timing", [2.0, 1.0, 9.0], budget=3)             # median 2.0: within 3, not within 1.5
    report.add("memory", [800], unit="MiB", budget=1024)
    assert [ok for _, ok, _ in report.budgets] == [False, True]
    assert report.rows[0]["median"] == 2.0 and report.rows[0]["judged"] == 1.5
    assert "half of 3 s: AVX-512" in capsys.readouterr().out
    report = bench.Report(flags={"avx2": True, "avx512": False})
    report.add("a timing", [2.0, 1.0, 9.0], budget=3)
    assert report.budgets[0][1] is True


def test_report_beside_and_sections():
    report = bench.Report(flags={"avx2": True, "avx512": False})
    report.add("a timing", [1.0], budget=3)
    report.beside([{"what": "a timing", "median": 2.5, "figure": "2.50 s", "runs": [2.5]}], bench.DEFAULT_LABEL)
    assert report.rows[0][bench.DEFAULT_LABEL]["figure"] == "2.50 s"
    report.section("one", "ok")
    report.section("two", "failed: ValueError: not enough values to unpack")
    assert report.sections_summary() == "sections: 1/2 ran; failed: two (failed: ValueError: not enough values to unpack)"


def test_each_labs_autograde_rows_get_their_own_default_kernels_figures(capsys):
    """The plain execution of each lab is a row of its own name, so that the figures of the run under
    ATEN_CPU_CAPABILITY=default land beside the lab they measured (they once all read Lab 13's)."""
    def rows(seconds):
        report = bench.Report(flags={"avx2": True, "avx512": False})
        for lab, s in seconds.items():
            bench.autograde_rows(report, lab, [1.25 * s], [s], [s / 2], "1/1")
        return report
    native = rows({"lab11": 2.0, "lab12": 3.0, "lab13": 4.0})
    native.beside(rows({"lab11": 20.0, "lab12": 30.0, "lab13": 40.0}).rows, bench.DEFAULT_LABEL)
    assert len({row["what"] for row in native.rows}) == len(native.rows) == 9
    for row in native.rows:
        if row["unit"] == "s":
            assert row[bench.DEFAULT_LABEL]["median"] == 10 * row["median"], row["what"]


def _run(cells, kernel, workers, peak=None):
    return {"cells": cells, "whole": cells + 0.5, "kernel": kernel, "workers": workers, "peak": peak}


def test_run_all_rows_count_the_workers_cpu_and_report_wall_per_worker_count():
    samples = {1: [_run(60, 58, 0, 700), _run(62, 59, 0, 710), _run(61, 60, 0, 705)],
               2: [_run(35, 8, 55), _run(33, 9, 52), _run(34, 7, 60)],
               4: [_run(36, 9, 58), _run(38, 10, 57), _run(37, 8, 59)]}
    rows = bench.run_all_rows("lab12", samples, 2, budget=45)
    (what, runs, note, budget), *walls = rows
    assert what == "Run All lab12 (fresh kernel), CPU: kernel and its workers" and budget == 45
    assert runs == [63, 61, 67]                          # kernel + workers, at the default count (2)
    assert "kernel 8.0 s + workers 55.0 s at COURSE_WORKERS=2" in note and "wall 34.0 s" in note
    assert [w[0] for w in walls] == [f"Run All lab12, wall at COURSE_WORKERS={n} (fresh kernel)" for n in (1, 2, 4)]
    assert walls[1][1] == [35, 33, 34] and all(w[3] is None for w in walls)        # reported, not budgeted
    assert "1.79 x as fast as 1 worker" in walls[1][2] and "1.00 x" in walls[0][2]
    assert "CPU 63.0 s" in walls[1][2] and walls[1][2].endswith("as fast as 1 worker)")
    assert "kernel peak 710 MiB" in walls[0][2]                 # each worker count's own peak, where known
    # benchmarks/figures.py quotes the CPU row by its start: no other row may start the same way
    assert [w for w, *_ in rows if w.startswith("Run All lab12 (fresh kernel)")] == [what]


def test_run_all_rows_of_a_notebook_without_workers():
    rows = bench.run_all_rows("lab11", {2: [_run(3, 2.9, 0)]}, 2, budget=15)
    assert len(rows) == 1 and rows[0][1] == [2.9]


def test_every_lab_has_a_run_all_and_the_sliders_name_known_labs():
    from course_staff.course import LABS
    assert {lab for _, lab, *_ in bench.SLIDERS} <= set(LABS)
    assert "lab13" in {lab for _, lab, *_ in bench.SLIDERS}
    assert set(bench.RUN_ALL_WORKERS) <= set(LABS)


def _digest_of(runs_cache):
    """The digest cell's own code, run here on a namespace holding ``runs`` (or none)."""
    import contextlib
    import io
    out, namespace = io.StringIO(), {} if runs_cache is None else {"runs": runs_cache}
    with contextlib.redirect_stdout(out):
        exec(bench._DIGEST, namespace)
    return bench.parse_digest([_stdout(out.getvalue())])


def test_the_digest_cell_holds_weights_and_histories_bit_for_bit():
    import types

    import torch
    from course_utils.tinylm import TinyLM

    def cache(weight_nudge=0.0, gold=0.5):
        torch.manual_seed(0)
        policy = TinyLM()
        with torch.no_grad():
            policy.weights[0] += weight_nudge
        return types.SimpleNamespace(runs={("beta", 0.1): (policy, {"gold": [gold, 0.25], "after": [policy]})})

    n, digest = _digest_of(cache())
    assert n == 1 and len(digest) == 64 and _digest_of(cache()) == (1, digest)
    assert _digest_of(cache(weight_nudge=1e-7))[1] != digest            # one weight's last bits
    assert _digest_of(cache(gold=0.5000001))[1] != digest               # one logged figure
    assert _digest_of(None) == (0, None)                                # a notebook without runs


def _cell(*outputs):
    return {"cell_type": "code", "outputs": list(outputs)}


def test_outputs_digest_sees_what_a_student_sees_and_not_bars_or_widget_ids():
    png = {"output_type": "display_data", "data": {"image/png": "iVBOR..."}, "metadata": {}}
    bar = {"output_type": "display_data", "metadata": {},
           "data": {"text/plain": "PPO: 100% 120/120 [00:02<00:00]", bench._WIDGET: {"model_id": "ab12"}}}
    base = bench.outputs_digest([_cell(_stdout("gold +0.87\n"), png), {"cell_type": "markdown"}])
    assert len(base) == 1
    slower_bar = {**bar, "data": {**bar["data"], "text/plain": "PPO: 100% 120/120 [00:05<00:00]"}}
    assert bench.outputs_digest([_cell(_stdout("gold +0.87\n"), bar, png)]) == base
    assert bench.outputs_digest([_cell(_stdout("gold +0.87\n"), slower_bar, png)]) == base
    assert bench.outputs_digest([_cell({"output_type": "stream", "name": "stderr", "text": "warn"},
                                       _stdout("gold +0.87\n"), png)]) == base
    assert bench.outputs_digest([_cell(_stdout("gold +0.88\n"), png)]) != base
    assert bench.outputs_digest([_cell(_stdout("gold +0.87\n"), {**png, "data": {"image/png": "iVBOS..."}})]) != base


def test_same_results_names_what_differs():
    def run(runs="d1", outputs=("a", "b")):
        return {**_run(30, 5, 20), "runs": (8, runs), "outputs": list(outputs)}
    ok, note = bench.same_results({1: [run(), run()], 2: [run(), run()]})
    assert ok and "8 runs'" in note and "COURSE_WORKERS=1, 2" in note
    ok, note = bench.same_results({1: [run()], 2: [run(runs="d2")]})
    assert not ok and "weights or histories" in note
    ok, note = bench.same_results({1: [run()], 2: [run(outputs=("a", "c"))], 4: [run()]})
    assert not ok and "code cells 1" in note and "weights" not in note


def test_a_failed_check_fails_the_run():
    report = bench.Report(flags={"avx2": True, "avx512": False})
    report.add("a timing", [1.0], budget=3)
    report.check("the same results", True, "(equal)")
    assert report.all_met() and report.summary() == "bench: 1/1 budgets met, 1/1 checks hold"
    report.check("the same results again", False, "(differ: x)")
    assert not report.all_met() and "missed: the same results again (differ: x)" in report.summary()


def test_fill_puts_a_partial_runs_rows_into_the_results_with_its_provenance(tmp_path):
    """``--only ... --fill``: a row of the same name is replaced, a new one added, the others kept as
    measured, and the partial run's provenance recorded beside the full run's."""
    path = tmp_path / "bench.json"
    old = {"commit": "full", "rows": [{"what": "a", "median": 1.0}, {"what": "b", "median": 2.0}]}
    path.write_text(json.dumps(old))
    record = {"command": "python -m benchmarks.bench --only b", "commit": "part", "date": "today", "machine": "m",
              "load": [1.0, 2.0], "rows": [{"what": "b", "median": 3.0}, {"what": "c", "median": 4.0}],
              bench.DEFAULT_LABEL: {"machine": "m, DEFAULT", "load": [2.0, 2.0], "rows": "dropped"}}
    data = json.loads(bench.fill(record, path).read_text())
    assert [(r["what"], r["median"]) for r in data["rows"]] == [("a", 1.0), ("b", 3.0), ("c", 4.0)]
    assert data["commit"] == "full" and data["filled"] == [{
        "command": record["command"], "commit": "part", "date": "today", "machine": "m", "load": [1.0, 2.0],
        "rows": ["b", "c"], bench.DEFAULT_LABEL: {"machine": "m, DEFAULT", "load": [2.0, 2.0]}}]


def test_slow_laptop_is_twice_the_default_kernels_figure():
    row = {"median": 1.0, bench.DEFAULT_LABEL: {"median": 1.5}}
    assert bench.slow_laptop(row) == 3.0
    with pytest.raises(KeyError):                     # the control: a run without the default kernels' figure
        bench.slow_laptop({"median": 1.0})


def test_lab13_experiment_1_times_the_cell_students_run(tmp_path):
    """The bench times Lab 13's "Five runs" cell as the notebook holds it: the one code cell that trains DPO at
    three betas and GRPO twice for views.Frontier, read by Experiment 1's heading."""
    import nbformat
    from course_staff.solutions import notebook_path
    path = notebook_path("lab13")
    nb = nbformat.read(str(path), as_version=4)
    frontier = [c.source for c in nb.cells if c.cell_type == "code" and "views.Frontier(" in c.source
                and "BETAS = (0.05, 0.1, 0.2)" in c.source and 'kl_in="reward"' in c.source]
    assert len(frontier) == 1 and bench.lab13_experiment_1() == frontier[0]
    heading = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == bench.LAB13_EXPERIMENT_1_HEADING)
    heading.metadata["nbgrader"]["grade_id"] = "md_renamed"                     # the control: the marker gone
    nbformat.write(nb, str(tmp_path / "lab13.ipynb"))
    with pytest.raises(LookupError, match="md_exp1"):
        bench.lab13_experiment_1(tmp_path / "lab13.ipynb")
