"""The measured figures: what each results file measured, whether it is stale, and the figures the
documents quote.

    python -m benchmarks.figures            # `make figures`: render every marked span from results/*.json
    python -m benchmarks.figures --stale    # name the stale figures and the files changed since

Two lanes. `make test` decides correctness, with the same verdict on every machine. A measured figure
(a timing, the class benchmark, how long `make test` took, the five-seed science table) is made by its
own target (`make bench`, `make bench-class`, `make science`), written to benchmarks/results/ with its
provenance (commit, machine, load) and never fails a test. Once the files it measured have changed it
is *stale*: `make test` (tests/conftest.py) and the bench targets print a warning naming the figure and
the files, and nothing fails. Re-measuring is the maintainer's choice, on a quiet machine.

A document quotes a figure inside a marked span that `make figures` renders from the results file:

    `make test` took <!-- fig:make_test.duration -->11 min 31 s<!-- /fig --> on a fresh clone

A notebook's prose is written by hand: there a figure is checked within a band (BANDS: "about 32 s"
must lie within a third of the measured figure; tests/test_figures.py).
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from course_staff.course import REPO
from course_staff.fingerprint import code_digest

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# what each results file measured: its code (compared without comments and docstrings, notebooks by their
# code cells; folders: their .py, .ipynb and .pt files) and the SFT checkpoint
MEASURED = {"bench.json": ["benchmarks/bench.py", "course_utils", "course_staff", "source/lab11/lab11.ipynb",
                           "source/lab12/lab12.ipynb", "notebooks/beyond_ppo.ipynb", "nbgrader_config.py"],
            "make_test.json": ["benchmarks/bench.py", "course_utils", "course_staff", "tests", "source",
                               "notebooks", "Makefile", ".ci/run", "pyproject.toml", "environment.yml"],
            "bench_class.json": ["benchmarks/bench_class.py", "course_utils", "course_staff/grading",
                                 "tests/classroom.py", "tests/harness.py", "tests/students", "source/lab11/lab11.ipynb",
                                 "nbgrader_config.py"]}
# how each is made again
REMAKE = {"bench.json": "make bench", "make_test.json": "python -m benchmarks.bench --make-test",
          "bench_class.json": "make bench-class", "science.json": "make science"}
DOCUMENTS = ("README.md", "docs/ta_guide.md", "benchmarks/README.md")     # where marked spans may stand
SPAN = re.compile(r"<!-- fig:(?P<key>[\w.]+) -->(?P<text>.*?)<!-- /fig -->", re.S)
BAND = 1 / 3            # "about x": within a third of the measured figure


# ----------------------------------------------------------------------------- fingerprints
def _code(rel, data):
    """What a file contributes to a fingerprint: Python as its syntax tree without docstrings or
    comments, a notebook as the code of its code cells, anything else as its bytes."""
    if rel.endswith(".py"):
        return code_digest(data.decode()).encode()
    if rel.endswith(".ipynb"):
        cells = json.loads(data)["cells"]
        return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in cells if c["cell_type"] == "code").encode()
    return data


@lru_cache(maxsize=None)
def _cached_code(path, rel, mtime_ns, size):
    return _code(rel, Path(path).read_bytes())


def file_code(rel, root=REPO):
    """``_code`` of a file of the working tree (read once while it is unchanged)."""
    path = Path(root) / rel
    stat = path.stat()
    return _cached_code(str(path), rel, stat.st_mtime_ns, stat.st_size)


def measured_files(name, root=REPO):
    """The files (paths relative to root) that MEASURED[name] names today."""
    out = []
    for rel in MEASURED[name]:
        path = Path(root) / rel
        if path.is_dir():
            out += sorted(p.relative_to(root).as_posix() for p in path.rglob("*")
                          if p.suffix in (".py", ".ipynb", ".pt") and "__pycache__" not in p.parts
                          and ".ipynb_checkpoints" not in p.parts)
        elif path.exists():
            out.append(rel)
    return out


def fingerprint(name, root=REPO):
    """sha256 of the files a results file measured, and of torch's version."""
    import torch

    h = hashlib.sha256(f"torch {torch.__version__}".encode())
    for rel in measured_files(name, root):
        h.update(rel.encode() + file_code(rel, root))
    return h.hexdigest()


def inputs(name, root=REPO):
    """{file: digest of its code} of what MEASURED[name] names: a results file records it, so that a later
    run can say which files changed."""
    return {rel: hashlib.sha256(file_code(rel, root)).hexdigest()[:16]
            for rel in measured_files(name, root)}


def _git(*args, root=REPO):
    res = subprocess.run(["git", *args], cwd=root, capture_output=True)
    return res.stdout if res.returncode == 0 else None


def changed_since(name, data, root=REPO):
    """The files whose code differs from what the results ``data`` measured ([] when current): by the
    digests the results record, else against the commit they name (git), else unknown."""
    if data.get("fingerprint") and data["fingerprint"] == fingerprint(name, root):
        return []
    now = inputs(name, root)
    if "inputs" in data:
        then = data["inputs"]
        return sorted(f for f in set(now) | set(then) if now.get(f) != then.get(f))
    commit = str(data.get("commit", "")).split("+")[0]
    diff = _git("diff", "--name-only", commit, "--", *MEASURED[name], root=root) if commit else None
    if diff is None:
        return ["(which files is not known: the results name no commit this clone has)"]
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", *MEASURED[name], root=root) or b""
    changed = []
    for rel in sorted(set(diff.decode().split()) | set(untracked.decode().split())):
        if rel not in MEASURED[name] and not rel.endswith((".py", ".ipynb", ".pt")):
            continue                                   # not a file the figure measured (a README, a PNG)
        old = _git("show", f"{commit}:{rel}", root=root)
        then = None if old is None else hashlib.sha256(_code(rel, old)).hexdigest()[:16]
        if then != now.get(rel):
            changed.append(rel)
    if not changed and data.get("fingerprint"):
        return ["(torch's version)"]
    return changed


def results(name):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _science_stale():
    """The criteria that results/science.json and the code disagree on (names, claims, thresholds, controls)."""
    from benchmarks import science

    data = results("science.json")
    committed = {(c["experiment"], c["name"], c["claim"], c["threshold"], tuple(c["controls"]))
                 for c in data["criteria"]}
    code = {(e.name, c.name, c.claim, c.threshold_text(), tuple(label for label, _ in c.controls))
            for e in science.experiments() for c in e.criteria}
    return sorted({f"{e}.{n}" for e, n, *_ in committed ^ code})


def stale_report(root=REPO):
    """One line per stale figure (empty when every committed figure measured the current files)."""
    lines = []
    for name in MEASURED:
        data = results(name)
        if data is None:
            lines.append(f"benchmarks/results/{name} is missing ({REMAKE[name]} makes it)")
            continue
        changed = changed_since(name, data, root)
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            lines.append(f"benchmarks/results/{name} (commit {data.get('commit', '?')}) is stale: changed since: "
                         f"{shown} (re-measure: {REMAKE[name]}, then make figures)")
    if results("science.json") is not None:
        try:
            differ = _science_stale()
        except Exception as err:  # noqa: BLE001 -- a warning must not turn into an error
            differ = [f"(could not compare: {type(err).__name__}: {err})"]
        if differ:
            lines.append(f"benchmarks/results/science.json judged other criteria than the code's: {', '.join(differ)} "
                         f"(re-measure: {REMAKE['science.json']})")
    from course_staff.beyond.results import load_cache
    if load_cache() is None:
        lines.append("course_staff/beyond/data/beyond_ppo_results.json (a cache) is stale: the Beyond PPO notebook "
                     "and its test rebuild it on their next run (about a minute of CPU)")
    return lines


# ----------------------------------------------------------------------------- the figures documents quote
def _row(data, what):
    """The median of the one row whose description starts with ``what``."""
    rows = [r for r in data["rows"] if r["what"].startswith(what)]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of the results start with {what!r}")
    return rows[0]["median"]


def _minutes(minutes):
    whole = int(minutes)
    return f"{whole} min {round((minutes - whole) * 60)} s"


def _machine(data):
    """"2-core AMD EPYC" from a results file's machine record."""
    parts = [p.strip() for p in data["machine"].split(";")[0].split(",")]
    cores = next(p.split()[0] for p in parts if p.endswith("cores"))
    return f"{cores}-core {parts[1]}"


def _class_cpu(data, each=False):
    """The range of the runs' CPU seconds for the class (per submission with ``each``)."""
    cpu = sorted(run["cpu"] / (data["size"] if each else 1) for run in data["runs"].values())
    return f"{cpu[0]:.1f}-{cpu[-1]:.1f}" if each else f"{cpu[0]:.0f}-{cpu[-1]:.0f}"


def _markdown(module):
    from importlib import import_module
    return lambda data: import_module(f"benchmarks.{module}").markdown()


# key -> (results file, render(data) -> text)
FIGURES = {
    "make_test.duration": ("make_test.json", lambda d: _minutes(_row(d, "`make test`"))),
    "make_test.passed": ("make_test.json", lambda d: re.search(r"\d+ passed", d["rows"][0]["note"]).group(0)),
    "make_test.machine": ("make_test.json", _machine),
    "make_test.load": ("make_test.json", lambda d: f"{d['load'][0]:.1f}"),
    "bench.run_all_lab12": ("bench.json", lambda d: f"{_row(d, 'Run All lab12 (fresh kernel)'):.0f} s"),
    "bench.ppo_run": ("bench.json", lambda d: f"{_row(d, 'one PPO run'):.1f} s"),
    "bench.autograde_lab11": ("bench.json", lambda d: f"{_row(d, 'autograde lab11'):.1f} s"),
    "bench.autograde_lab12": ("bench.json", lambda d: f"{_row(d, 'autograde lab12'):.1f} s"),
    "bench_class.cpu": ("bench_class.json", _class_cpu),
    "bench_class.cpu_each": ("bench_class.json", lambda d: _class_cpu(d, each=True)),
    "bench_class.size": ("bench_class.json", lambda d: str(d["size"])),
    "bench_class.runs": ("bench_class.json", lambda d: str(len(d["runs"]))),
    "bench.table": ("bench.json", _markdown("bench")),
    "science.table": ("science.json", _markdown("science")),
    "bench_class.table": ("bench_class.json", _markdown("bench_class")),
}

# notebooks (prose by hand): (notebook, pattern whose group 1 is the quoted number, key of FIGURES in seconds)
BANDS = [("source/lab12/lab12.ipynb", r"\*Run All\* takes about (\d+(?:\.\d+)?) s of CPU", "bench.run_all_lab12"),
         ("source/lab12/lab12.ipynb", r"Every run below takes about (\d+(?:\.\d+)?) s of CPU", "bench.ppo_run")]


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
