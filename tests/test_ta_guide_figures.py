"""The TA guide's figures of the grader's time: each stands in a marked span whose key benchmarks/figures.py
renders from benchmarks/results/bench.json or bench_class.json (the figure is defined there, once), and each
span must hold what its key renders now. A failure names the figure to write (`make figures`, after `make
bench`, `python -m benchmarks.bench --only "autograde" --fill` or `make bench-class`)."""

import re

from benchmarks import figures

GUIDE = "docs/ta_guide.md"
# the grader's figures the guide must quote, each in a span of its own key
GRADER_KEYS = ["bench.kernel_start_sandboxed", "bench.kernel_start_unsandboxed", "bench_class.cpu_each_most",
               "bench_class.class_table", "bench_class.seconds_one", "bench_class.seconds_two", "bench_class.speedup"]


def out_of_step(text, figure=figures.figure):
    """[(key, what the guide quotes, the figure to write)] of every grader figure whose span holds another
    text than ``figure(key)`` renders (a key with no span: quoted None)."""
    spans = {}
    for m in figures.SPAN.finditer(text):
        spans.setdefault(m.group("key"), []).append(m.group("text").strip())
    return [(key, quoted, figure(key).strip()) for key in GRADER_KEYS
            for quoted in spans.get(key, [None]) if quoted != figure(key).strip()]


def test_the_guides_figures_of_the_grader_are_those_of_the_results():
    wrong = out_of_step((figures.REPO / GUIDE).read_text())
    assert not wrong, "docs/ta_guide.md quotes (key, quoted, write; then `make figures`): " + "; ".join(map(str, wrong))


def test_control_a_figure_quoted_otherwise_or_gone_fails():
    """The control: the guide with the sandboxed start quoted as 0.93 s, a table cell changed, a span gone."""
    text = (figures.REPO / GUIDE).read_text()
    assert out_of_step(text) == []
    start = figures.figure("bench.kernel_start_sandboxed")
    assert start != "0.93 s"
    broken = text.replace(f"<!-- fig:bench.kernel_start_sandboxed -->{start}", "<!-- fig:bench.kernel_start_sandboxed -->0.93 s")
    assert out_of_step(broken) == [("bench.kernel_start_sandboxed", "0.93 s", start)]
    assert [w[0] for w in out_of_step(text.replace("| 1 core each  | ", "| 1 core each  | 1"))] == ["bench_class.class_table"]
    assert out_of_step(text.replace("fig:bench_class.speedup", "fig:bench_class.gone")) == \
        [("bench_class.speedup", None, figures.figure("bench_class.speedup"))]


def test_the_class_table_follows_from_the_cost_of_a_submission():
    """The table of 400 submissions is 400 x the quoted CPU seconds over cores x machines (worked by hand here
    for one cell of each unit), and a class's costliest run is the one the guide plans on."""
    data = {"size": 40, "runs": {"2, sandbox off": {"seconds": 59.5, "cpu": 97.3, "jobs": 2},
                                 "3, sandbox off": {"seconds": 59.5, "cpu": 80.0, "jobs": 2},
                                 "1": {"seconds": 110.3, "cpu": 200.0, "jobs": 1}}}       # sandboxed: kernels' CPU unseen
    assert figures._class_cpu_most(data) == "2.4"
    rows = {int(c): cells.split("|") for c, cells in
            re.findall(r"^\| (\d+) cores? each +\|(.*)\|$", figures._class_table(data), re.M)}
    assert [cell.strip() for cell in rows[1]] == ["16 min", "8.0 min", "4.0 min"]       # 400 x 2.4 s = 960 s
    assert rows[8][2].strip() == "30 s"                                                    # 960 s / 32
