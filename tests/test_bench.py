"""benchmarks/bench.py's own logic (no timing): the kernel probe's parser, the budget rule, the report."""

import pytest

from benchmarks import bench


def _stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_probe_parses_one_line():
    peak, cpu = bench.parse_probe([_stdout("bench-probe 352256 2.71\n")])
    assert peak == 344.0 and cpu == 2.71


@pytest.mark.parametrize("outputs", [
    # the shape that crashed `autograde lab11` on an Intel machine: one print, two stream messages
    # (the kernel flushed between print's writes), the first holding one field
    [_stdout("bench-probe 352256"), _stdout(" 2.71\n")],
    [_stdout("bench-probe "), _stdout("352256 "), _stdout("2.71"), _stdout("\n")],
    # stderr and other outputs around it, and text as a list of strings (nbformat allows both)
    [{"output_type": "stream", "name": "stderr", "text": "UserWarning: something\n"},
     _stdout(["bench-probe 352256 ", "2.71\n"])],
    [_stdout("a line the notebook's last cell left 1 2\n"), _stdout("bench-probe 352256 2.71\n"),
     {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}}],
])
def test_probe_parses_split_and_noisy_outputs(outputs):
    assert bench.parse_probe(outputs) == (344.0, 2.71)


def test_probe_without_peak_memory():
    """No /proc/self/status (not Linux): the peak is unknown, the CPU time still read."""
    assert bench.parse_probe([_stdout("bench-probe -1 0.5\n")]) == (None, 0.5)


@pytest.mark.parametrize("outputs", [[], [_stdout("")], [_stdout("352256 2.71\n")],
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
