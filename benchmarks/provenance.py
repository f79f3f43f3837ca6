"""Provenance of the measured figures: which files each results file measured, and which of them have
changed since (a stale figure).

    python -m benchmarks.provenance        # name the stale figures and the files changed since

Two lanes. `make test` decides correctness, with the same verdict on every machine. A measured figure
(a timing, the class benchmark, how long `make test` took, the five-seed science table) is made by its
own target (`make bench`, `make bench-class`, `make science`), written to benchmarks/results/ with its
provenance (command, commit, date, machine, load, and the digests of the files it measured) and never
fails a test. Once the files it measured have changed it is *stale*: `make test` (tests/conftest.py)
and the bench targets print a warning naming the figure and the files, and nothing fails.
Re-measuring is the maintainer's choice, on a quiet machine. (benchmarks/figures.py renders the
figures into the documents that quote them.)
"""

import hashlib
import json
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
MEASURED = {"bench.json": ["benchmarks/bench.py", "benchmarks/ppo_floor.py", "course_utils", "course_staff",
                           "source/lab11/lab11.ipynb", "source/lab12/lab12.ipynb", "notebooks/beyond_ppo.ipynb", "nbgrader_config.py"],
            "make_test.json": ["benchmarks/bench.py", "course_utils", "course_staff", "tests", "source",
                               "notebooks", "Makefile", ".ci/run", "pyproject.toml", "environment.yml"],
            "bench_class.json": ["benchmarks/bench_class.py", "course_utils", "course_staff/grading",
                                 "course_staff/testbed/classroom.py", "course_staff/testbed/harness.py", "course_staff/testbed/students", "source/lab11/lab11.ipynb",
                                 "nbgrader_config.py"]}
# how each is made again
REMAKE = {"bench.json": "make bench", "make_test.json": "python -m benchmarks.bench --make-test",
          "bench_class.json": "make bench-class", "science.json": "make science"}

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
                         f"{shown} (re-measure: {REMAKE[name]})")
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


def render_documents():
    """`make figures` in a process of its own (benchmarks/figures.py imports the benchmarks that call this):
    the documents quote the results just written."""
    subprocess.run([sys.executable, "-m", "benchmarks.figures"], cwd=REPO, check=False)


def main():
    lines = stale_report()
    print("\n".join(f"warning: {line}" for line in lines) or "every committed figure measured the current files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
