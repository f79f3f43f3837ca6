"""The TA guide's figures of the grader's time that no marked span renders (benchmarks/figures.py has no key
for them): each says what benchmarks/results/bench.json or bench_class.json holds, to the digits it shows. A
failure names the number to write (after `make bench`, or `python -m benchmarks.bench --only "autograde lab11"
--fill`; `make bench-class`)."""

import re

from benchmarks.provenance import REPO, results

GUIDE = "docs/ta_guide.md"
# (the sentence, whose group 1 is the quoted figure; the bench.json row it quotes; digits shown)
SENTENCES = [
    (r"a kernel's start and stop take ([\d.]+) s in it against", "autograde: a kernel's start and stop, sandboxed", 2),
    (r"s in it against ([\d.]+) s with `SANDBOX=off`", "autograde: a kernel's start and stop, unsandboxed", 2),
]


def out_of_step(text, data):
    """[(what the sentence quotes, the figure to write, its row)] of every sentence that quotes another
    number than its row's median (a sentence no longer found, or a row missing, counts too)."""
    text = " ".join(text.split())
    rows = {row["what"]: row for row in data["rows"]}
    wrong = []
    for pattern, what, digits in SENTENCES:
        quoted = re.findall(pattern, text)
        figure = f"{rows[what]['median']:.{digits}f}" if what in rows else "(no such row: run make bench)"
        if quoted != [figure]:
            wrong.append((quoted or f"no sentence {pattern!r}", figure, what))
    return wrong


def per_submission(data):
    """A class's CPU seconds per submission (bench_class.json: the costlier run), to a tenth as quoted."""
    return f"{max(run['cpu'] for run in data['runs'].values()) / data['size']:.1f}"


def class_table(each):
    """The guide's table of 400 submissions at ``each`` seconds each: {(cores, machines): text}."""
    def text(seconds):
        minutes = seconds / 60
        return f"{seconds:.0f} s" if seconds < 60 else f"{minutes:.0f} min" if minutes >= 10 else f"{minutes:.1f} min"
    return {(cores, machines): text(400 * each / (cores * machines)) for cores in (1, 2, 4, 8) for machines in (1, 2, 4)}


def table_in(text):
    """{(cores, machines): text} of the guide's table of 400 submissions."""
    cells = {}
    for cores, row in re.findall(r"^\| (\d+) cores? each +\|(.*)\|$", text, re.M):
        for machines, cell in zip((1, 2, 4), row.split("|")):
            cells[(int(cores), machines)] = cell.strip()
    return cells


def test_a_class_takes_what_its_submissions_cost():
    """"a class of N takes about N x 2.4 s" quotes bench_class.json's CPU seconds per submission, and the table of
    400 submissions follows from it."""
    text, each = (REPO / GUIDE).read_text(), per_submission(results("bench_class.json"))
    assert re.findall(r"a class of N takes about N x ([\d.]+) s", text) == [each], f"write: N x {each} s"
    assert table_in(text) == class_table(float(each))


# (the sentence, whose group 1 is the quoted figure; that figure from bench_class.json)
CLASS_SENTENCES = [
    (r"the 40 took (\d+) s with one grader", lambda d: f"{d['runs']['1']['seconds']:.0f}"),
    (r"s with one grader and (\d+) s with two", lambda d: f"{d['runs']['2']['seconds']:.0f}"),
    (r"s with two \(a speed-up of ([\d.]+), on a quiet machine",
     lambda d: f"{d['runs']['1']['seconds'] / d['runs']['2']['seconds']:.1f}"),
]


def class_out_of_step(text, data):
    """[(what the sentence quotes, the figure to write)] of the class sentences that quote another number."""
    text = " ".join(text.split())
    return [(re.findall(pattern, text), figure(data)) for pattern, figure in CLASS_SENTENCES
            if re.findall(pattern, text) != [figure(data)]]


def test_the_class_run_is_quoted_as_bench_class_measured_it():
    wrong = class_out_of_step((REPO / GUIDE).read_text(), results("bench_class.json"))
    assert not wrong, f"docs/ta_guide.md quotes (quoted, write): {wrong}"


def test_control_a_class_run_quoted_otherwise_fails():
    data = {"runs": {"1": {"seconds": 94.8}, "2": {"seconds": 53.3}}}
    text = "the 40 took 95 s with one grader and 53 s with two (a speed-up of 1.8, on a quiet machine"
    assert class_out_of_step(text, data) == []
    assert class_out_of_step(text.replace("and 53 s", "and 63 s"), data) == [(["63"], "53")]


def test_control_a_table_that_does_not_follow_fails():
    text = (REPO / GUIDE).read_text()
    assert table_in(text) != class_table(3.0)
    each = float(per_submission(results("bench_class.json")))
    assert table_in(text) == class_table(each)
    assert table_in(text.replace("| 1 core each  | ", "| 1 core each  | 1")) != class_table(each)


def test_the_guides_figures_of_the_grader_are_those_of_bench():
    wrong = out_of_step((REPO / GUIDE).read_text(), results("bench.json"))
    assert not wrong, "docs/ta_guide.md quotes (quoted, write, bench.json row): " + "; ".join(map(str, wrong))


def test_a_sentence_quoting_another_number_fails():
    """The control: the guide with the sandboxed start quoted as 0.93 s, and with the sentence gone."""
    data = {"rows": [{"what": what, "median": 0.5} for _, what, _ in SENTENCES]}
    text = "a kernel's start and stop take 0.50 s in it against 0.50 s with `SANDBOX=off` (...)"
    assert out_of_step(text, data) == []
    wrong = out_of_step(text.replace("take 0.50 s", "take 0.93 s"), data)
    assert wrong == [(["0.93"], "0.50", "autograde: a kernel's start and stop, sandboxed")]
    assert len(out_of_step("it adds well under a second to a kernel's start", data)) == len(SENTENCES)
    assert out_of_step(text, {"rows": []})[0][1] == "(no such row: run make bench)"
