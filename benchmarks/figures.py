"""The measured figures the documents quote, rendered from benchmarks/results.

    python -m benchmarks.figures            # `make figures`: render every marked span, then name the stale figures

A document quotes a figure inside a marked span that `make figures` renders from the results file
(the measuring targets run it after a run):

    `make test` took <!-- fig:make_test.duration -->11 min 31 s<!-- /fig --> on a fresh clone

A notebook's prose (and the student edition's README, which ships without marks) is written by hand:
there a figure is checked within a band (BANDS: "about 32 s" must lie within a third of the measured
figure; tests/test_figures.py). A timing sentence quotes the figure of the course's test machine and
what a slow laptop takes (TIMINGS: twice the figure under ATEN_CPU_CAPABILITY=default, bench.SLOW_LAPTOP);
README's and the TA guide's timing spans must be rendered (timings_out_of_step). Whether a figure still
measures the current code is benchmarks/provenance.py's question: a stale figure is a warning, never a failure.
"""

import argparse
import re
import sys
from pathlib import Path

from benchmarks import bench, bench_class, quoted, science
from benchmarks.provenance import REPO, results, stale_report
from course_staff.course import LABS

DOCUMENTS = ("README.md", "docs/ta_guide.md", "benchmarks/README.md")     # where marked spans may stand
SPAN = re.compile(r"<!-- fig:(?P<key>[\w.]+) -->(?P<text>.*?)<!-- /fig -->", re.S)
BAND = 1 / 3            # "about x": within a third of the measured figure


# ----------------------------------------------------------------------------- the figures documents quote
def _the_row(data, what):
    """The one row whose description starts with ``what``."""
    rows = [r for r in data["rows"] if r["what"].startswith(what)]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of the results start with {what!r}")
    return rows[0]


def _row(data, what):
    """The median of the one row whose description starts with ``what``."""
    return _the_row(data, what)["median"]


def _kind(row, kind):
    """A timing row's seconds of ``kind``: "" its median here, ".default" under ATEN_CPU_CAPABILITY=default,
    ".slow" what the course tells students a slow laptop takes (bench.slow_laptop: twice the default's)."""
    return {"": lambda: row["median"], ".default": lambda: row[bench.DEFAULT_LABEL]["median"],
            ".slow": lambda: bench.slow_laptop(row)}[kind]()


def _seconds(what, kind="", digits=0):
    """render(data) of the timing row of bench.json that starts with ``what``, in seconds (see _kind)."""
    return lambda data: f"{_kind(_the_row(data, what), kind):.{digits}f} s"


def _longest(what, kind="", digits=0):
    """render(data) of the longest of the labs' rows ``what`` ("Run All {lab} (fresh kernel)"), in seconds (see _kind)."""
    return lambda data: f"{max(_kind(_the_row(data, what.format(lab=lab)), kind) for lab in LABS):.{digits}f} s"


def _minutes(minutes):
    """"14 min 36 s", or "56 s" under a minute."""
    whole = int(minutes)
    return f"{whole} min {round((minutes - whole) * 60)} s" if whole else f"{round(minutes * 60)} s"


def _verdict(row):
    """"within its 15-minute budget" or "over its 15-minute budget" of a timed row in minutes."""
    return f"{'within' if row['ok'] else 'over'} its {row['budget']:g}-minute budget"


def _machine(data):
    """"2-core AMD EPYC" from a results file's machine record."""
    parts = [p.strip() for p in data["machine"].split(";")[0].split(",")]
    cores = next(p.split()[0] for p in parts if p.endswith("cores"))
    return f"{cores}-core {parts[1]}"


def _class_runs(data):
    """{name: run} of the class runs whose kernels' CPU the grader sees (unsandboxed;
    bench_class._children_cpu), or every run of an older file."""
    return ({name: run for name, run in data["runs"].items() if "sandbox off" in name}
            or dict(data["runs"]))


def _span(values, fmt):
    """"a-b" of the smallest and largest of ``values`` as ``fmt`` writes them ("a" when both read the same)."""
    text = [fmt(v) for v in (min(values), max(values))]
    return text[0] if text[0] == text[1] else "-".join(text)


def _class_cpu(data, each=False):
    """The range of the runs' CPU seconds for the class (per submission with ``each``)."""
    return _span([run["cpu"] / (data["size"] if each else 1) for run in _class_runs(data).values()],
                 (lambda c: f"{c:.1f}") if each else (lambda c: f"{c:.0f}"))


def _class_cpu_most(data):
    """The costliest of the runs' CPU seconds per submission, to a tenth: what "a class of N takes about N x
    this" plans on."""
    return f"{max(run['cpu'] for run in _class_runs(data).values()) / data['size']:.1f}"


CLASS_OF = 400          # the class the TA guide's table plans for


def _class_table(data):
    """The TA guide's table: a class of CLASS_OF at _class_cpu_most seconds each, on 1-8 cores and 1-4 machines."""
    each = float(_class_cpu_most(data))

    def text(seconds):
        minutes = seconds / 60
        return f"{seconds:.0f} s" if seconds < 60 else f"{minutes:.0f} min" if minutes >= 10 else f"{minutes:.1f} min"
    lines = [f"| {CLASS_OF} submissions | 1 machine | 2 machines | 4 machines |", "|---|---|---|---|"]
    for cores in (1, 2, 4, 8):
        label = f"{cores} core each " if cores == 1 else f"{cores} cores each"
        lines.append(f"| {label} | " + " | ".join(text(CLASS_OF * each / (cores * machines))
                                                 for machines in (1, 2, 4)) + " |")
    return "\n".join(lines)


def _class_seconds(jobs):
    """render(data) of the wall seconds of the class run with ``jobs`` graders (sandboxed)."""
    return lambda data: f"{data['runs'][str(jobs)]['seconds']:.0f}"


def _class_startup(data):
    """The range of the runs' seconds beyond their graders' share of the CPU (wall - CPU / graders): what a
    run costs whatever the class's size (start-up, the gradebook, the last grader finishing alone)."""
    jobs = lambda name, run: run.get("jobs") or int(re.match(r"\d+", name).group(0))    # older files: in the name
    return _span([run["seconds"] - run["cpu"] / jobs(name, run) for name, run in _class_runs(data).items()],
                 lambda s: f"{s:.0f}")


# the timing sentences students, TAs and README read: each figure here (bench.KEY), under
# ATEN_CPU_CAPABILITY=default (bench.KEY.default) and what a slow laptop takes (bench.KEY.slow)
TIMINGS = {
    **{f"bench.{key}{kind}": ("bench.json", _seconds(what, kind, digits)) for kind in quoted.KINDS
       for key, (what, digits) in quoted.ROWS.items()},
    **{f"bench.{key}{kind}": ("bench.json", _longest(what, kind, digits)) for kind in quoted.KINDS
       for key, (what, digits) in quoted.LONGEST.items()},
    **{f"bench.kernel_start_{kind}": ("bench.json", _seconds(f"autograde: a kernel's start and stop, {kind}", "", 2))
       for kind in ("sandboxed", "unsandboxed")},
}

# key -> (results file, render(data) -> text)
FIGURES = {
    "make_test.duration": ("make_test.json", lambda d: _minutes(_row(d, "`make test`"))),
    "make_test.passed": ("make_test.json", lambda d: re.search(r"\d+ passed", d["rows"][0]["note"]).group(0)),
    "make_test.machine": ("make_test.json", _machine),
    "make_test.load": ("make_test.json", lambda d: f"{d['load'][0]:.1f}"),
    "make_test.verdict": ("make_test.json", lambda d: _verdict(_the_row(d, "`make test`"))),
    "make_test.fast": ("make_test.json", lambda d: _minutes(_row(d, "`make test-fast`"))),
    **TIMINGS,
    "bench_class.cpu": ("bench_class.json", _class_cpu),
    "bench_class.cpu_each": ("bench_class.json", lambda d: _class_cpu(d, each=True)),
    "bench_class.size": ("bench_class.json", lambda d: str(d["size"])),
    "bench_class.startup": ("bench_class.json", _class_startup),
    "bench_class.cpu_each_most": ("bench_class.json", _class_cpu_most),
    "bench_class.class_table": ("bench_class.json", _class_table),
    "bench_class.seconds_one": ("bench_class.json", _class_seconds(1)),
    "bench_class.seconds_two": ("bench_class.json", _class_seconds(2)),
    "bench_class.speedup": ("bench_class.json",
                            lambda d: f"{d['runs']['1']['seconds'] / d['runs']['2']['seconds']:.1f}"),
    "bench.table": ("bench.json", lambda d: bench.markdown()),
    "science.table": ("science.json", lambda d: science.markdown()),
    "bench_class.table": ("bench_class.json", lambda d: bench_class.markdown()),
}

# notebooks and the student edition's README (prose by hand): (file, pattern whose group 1 is the quoted
# number, key of FIGURES in seconds).
# Each timing sentence quotes the figure of the course's test machine and what a slow laptop takes
# (benchmarks/claims.py holds the same sentences, backed by ``measured:`` these keys).
HERE, SLOW = r" s of CPU on the course's test machine", r" s on an older laptop"
BANDS = [
    ("source/lab12/lab12.ipynb", r"Each run \(120 iterations of 64 prompts\) takes about ([\d.]+)" + HERE, "bench.ppo_run"),
    ("source/lab12/lab12.ipynb", HERE + r", about ([\d.]+)" + SLOW + ", and is cached", "bench.ppo_run.slow"),
    ("source/lab13/lab13.ipynb", r"Five runs: about ([\d.]+)" + HERE, "bench.lab13_experiment_1"),
    ("source/lab13/lab13.ipynb", r"Five runs: about [\d.]+" + HERE + r", about ([\d.]+)" + SLOW,
     "bench.lab13_experiment_1.slow"),
    ("notebooks/00_start_here.ipynb", r"The whole notebook takes about ([\d.]+)" + HERE, "bench.run_all_start_here"),
    ("notebooks/00_start_here.ipynb", r"The whole notebook takes about [\d.]+" + HERE + r" \(about ([\d.]+)" + SLOW,
     "bench.run_all_start_here.slow"),
    ("course_staff/edition/files/README.md", r"Run All of a lab takes at most about ([\d.]+)" + HERE,
     "bench.run_all_longest"),
    ("course_staff/edition/files/README.md", r"Run All of a lab takes at most about [\d.]+" + HERE + r", about ([\d.]+)"
     + SLOW, "bench.run_all_longest.slow"),
    ("notebooks/beyond_ppo.ipynb", r"\*Run All\* reads them: about ([\d.]+)" + HERE, "bench.run_all_beyond"),
    ("notebooks/beyond_ppo.ipynb", r"\*Run All\* reads them: about [\d.]+" + HERE + r", about ([\d.]+)" + SLOW,
     "bench.run_all_beyond.slow"),
]


def figure(key):
    """The text of figure ``key``, rendered from its results file."""
    name, render = FIGURES[key]
    return render(results(name))


def render(text):
    """``text`` with every marked span's content rendered again from the results files. A multi-line
    figure (a table) keeps the span's line breaks around it."""
    def one(m):
        new = figure(m.group("key"))
        if "\n" in new or m.group("text").startswith("\n"):
            new = f"\n{new.strip()}\n"
        return f"<!-- fig:{m.group('key')} -->{new}<!-- /fig -->"
    return SPAN.sub(one, text)


def unrendered(root=REPO):
    """The documents whose marked figures differ from what the results files hold now (`make figures`
    renders them; a warning of `make test`, never a failure)."""
    return [rel for rel in DOCUMENTS if render((Path(root) / rel).read_text()) != (Path(root) / rel).read_text()]


def timings_out_of_step(root=REPO):
    """[(document, key, quoted, figure)] of every timing figure (TIMINGS) a document quotes in a marked span
    whose text is not what its results file renders now. Unlike the other figures (a warning until `make
    figures`), a timing sentence out of step with its figure fails tests/test_figures.py: readers plan on it."""
    out = []
    for rel in DOCUMENTS:
        for m in SPAN.finditer((Path(root) / rel).read_text()):
            if m.group("key") in TIMINGS and m.group("text") != figure(m.group("key")):
                out.append((rel, m.group("key"), m.group("text"), figure(m.group("key"))))
    return out


def within_band(quoted, measured, band=BAND):
    """Is a quoted "about x" within ``band`` (relative) of the measured figure?"""
    return abs(quoted - measured) <= band * abs(measured)


def main(argv=None):
    parser = argparse.ArgumentParser(description="render the documents' marked figures from benchmarks/results")
    parser.add_argument("--stale", action="store_true", help="only name the stale figures")
    args = parser.parse_args(argv)
    if not args.stale:
        for rel in DOCUMENTS:
            path = REPO / rel
            old = path.read_text()
            new = render(old)
            if new != old:
                path.write_text(new)
                print(f"rendered the figures of {rel}")
    lines = stale_report()
    print("\n".join(f"warning: {line}" for line in lines) or "every committed figure measured the current files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
