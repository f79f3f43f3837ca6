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

The files a figure measured are listed in MEASURED, or, for the science table, derived from the code
it ran (``science_files``: the import closure of benchmarks.science, the lab notebooks it loads, the
weights it reads and the tests its ledger ran), so the list cannot drift from the code. The claims
ledger is read without its quotes (``ledger_code``): they are prose, checked by make test.
"""

import ast
import hashlib
import json
import os
import platform
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
                           "source", "notebooks/00_start_here.ipynb", "notebooks/beyond_ppo.ipynb",
                           "nbgrader_config.py"],
            "make_test.json": ["benchmarks/bench.py", "course_utils", "course_staff", "tests", "source",
                               "notebooks", "Makefile", ".ci/run", "pyproject.toml", "environment.yml"],
            "bench_class.json": ["benchmarks/bench_class.py", "course_utils", "course_staff/grading",
                                 "course_staff/testbed/classroom.py", "course_staff/testbed/harness.py", "course_staff/testbed/students", "source/lab11/lab11.ipynb",
                                 "nbgrader_config.py"]}
# how each is made again (every results file this module judges, in the order the warnings name them)
REMAKE = {"bench.json": "make bench", "make_test.json": "python -m benchmarks.bench --make-test",
          "bench_class.json": "make bench-class", "science.json": "make science, or make science-verify after a change that should move no number"}
SCIENCE_ROOT = "benchmarks.science"      # the science table's files: what running this module reads (science_files)
# the measurement lane's bookkeeping: modules that record and render figures and compute none, so the files
# a figure measured do not include them (nor what only they import)
BOOKKEEPING = ("benchmarks.provenance", "benchmarks.figures")

# ----------------------------------------------------------------------------- fingerprints
# The claims ledger's quotes are prose, as the notebooks' markdown is. A science run reads the ledger for
# what to check (each claim's notebook and backings: the criteria it judges, the tests it runs), never for
# the words quoted: no figure or verdict of the run depends on them. Whether each quote is in its notebook
# is checked by make test (tests/test_claims.py), the correctness lane. So the ledger's code is read
# without its quotes: rewording one to follow its notebook names no figure stale.
LEDGER = "benchmarks/claims.py"
QUOTE = "(a quote: prose, checked by tests/test_claims.py)"       # what stands in for each


def ledger_code(source):
    """code_digest of the claims ledger with the quote of every claim of CLAIMS (``C(where, quote,
    *backed_by)``) replaced by QUOTE; its notebook, its backings and every other line of code kept."""
    tree = ast.parse(source)
    claims = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                  and [getattr(t, "id", None) for t in node.targets] == ["CLAIMS"])
    for claim in claims.elts:
        claim.args[1] = ast.Constant(QUOTE)
    return code_digest(ast.unparse(tree))


def _code(rel, data):
    """What a file contributes to a fingerprint: Python as its syntax tree without docstrings or
    comments (the claims ledger without its quotes too: ledger_code), a notebook as the code of its code
    cells, anything else as its bytes."""
    if rel == LEDGER:
        return ledger_code(data.decode()).encode()
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


def measured_files(name, root=REPO, tests=None):
    """The files (paths relative to root) that MEASURED[name] names today; for the science table, the
    files its run reads (science_files; ``tests``: the pytest node ids its ledger ran)."""
    if name == "science.json":
        return science_files(root, tests)
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


def fingerprint(name, root=REPO, tests=None):
    """sha256 of the files a results file measured, and of torch's version."""
    import torch

    h = hashlib.sha256(f"torch {torch.__version__}".encode())
    for rel in measured_files(name, root, tests):
        h.update(rel.encode() + file_code(rel, root))
    return h.hexdigest()


def inputs(name, root=REPO, tests=None):
    """{file: digest of its code} of what a results file measured (measured_files): a results file records
    it, so that a later run can say which files changed."""
    return {rel: hashlib.sha256(file_code(rel, root)).hexdigest()[:16]
            for rel in measured_files(name, root, tests)}


# ----------------------------------------------------------------------------- what a run reads: its imports
# The course's own modules live in these packages; an import of anything else (torch, nbgrader) is not a file
# of the repository. The import graph below is read from the syntax trees alone (nothing is imported), every
# import counted wherever it stands: at the top of a module or inside a function (a lazy import runs too).
PACKAGES = ("course_utils", "course_staff", "benchmarks", "tests")


def module_files(root=REPO, packages=PACKAGES):
    """{module name: file relative to root} of every .py file of ``packages`` (a package: its __init__)."""
    out = {}
    for package in packages:
        for path in sorted((Path(root) / package).rglob("*.py")):
            rel = path.relative_to(root)
            if "__pycache__" in rel.parts or ".ipynb_checkpoints" in rel.parts:
                continue
            parts = rel.with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = rel.as_posix()
    return out


@lru_cache(maxsize=None)
def _cached_tree(path, rel, mtime_ns, size):
    if rel.endswith(".ipynb"):                       # its code cells (``_code``), IPython-only lines left out
        code = _cached_code(path, rel, mtime_ns, size).decode().splitlines()
        return ast.parse("\n".join(line for line in code if not line.lstrip().startswith(("%", "!"))))
    return ast.parse(Path(path).read_bytes())


def _tree(rel, root):
    """The syntax tree of a .py file, or of a notebook's code cells (read once while it is unchanged)."""
    path = Path(root) / rel
    stat = path.stat()
    try:
        return _cached_tree(str(path), rel, stat.st_mtime_ns, stat.st_size)
    except SystemError:     # Python 3.11's "AST constructor recursion depth mismatch", now and then in a thread: again
        return _cached_tree(str(path), rel, stat.st_mtime_ns, stat.st_size)


def imported(tree, module, is_package, known):
    """The modules of ``known`` that the code of ``module`` imports: ``import a.b``, ``from a import b``
    (a.b when it is a module, else a), ``from . import b`` resolved against its package."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        out |= {n for n in names if n in known}
    out.discard(module)
    return out


def import_graph(root=REPO, packages=PACKAGES):
    """{module: {modules of the course it imports}} over every module of ``packages``."""
    files = module_files(root, packages)
    return {m: imported(_tree(rel, root), m, rel.endswith("__init__.py"), files) for m, rel in files.items()}


def import_cycles(graph):
    """The groups of modules that import each other, directly or round a longer loop (the strongly
    connected components of more than one module), each as a sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):                                     # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def science_files(root=REPO, tests=None):
    """The files a science run reads (relative to root), derived from the code, not listed by hand:

    - every module of the course that benchmarks.science imports, directly or through another (lazy
      imports inside functions too), with the packages they sit in (their __init__ runs first); a string
      that names a module counts as its import (science.MODULES, loaded by importlib);
    - every lab notebook whose name a string of that code holds (``load_lab("lab12")``), and what its
      code cells import in turn;
    - the weights (.pt) those modules name beside them (``Path(__file__).with_name("data") / "sft.pt"``);
    - the test files of ``tests`` (the pytest node ids the ledger ran: claims.cited_tests()), what they
      import, and the conftest.py files pytest loads for them.

    The BOOKKEEPING modules (which record the run) are left out, and what only they import.
    """
    from course_staff.course import labs, source_notebook

    modules = module_files(root)
    notebooks = {lab: source_notebook(lab, root).relative_to(root).as_posix() for lab in labs(root)}
    todo = [modules[SCIENCE_ROOT]]
    for node_id in tests or ():
        rel = node_id.split("::")[0]
        todo.append(rel)
        for parent in Path(rel).parents:
            if (Path(root) / parent / "conftest.py").exists():
                todo.append((parent / "conftest.py").as_posix())
    seen = set()
    while todo:
        rel = todo.pop()
        if rel in seen or not (Path(root) / rel).exists() or rel in {modules.get(m) for m in BOOKKEEPING}:
            continue
        seen.add(rel)
        if not rel.endswith((".py", ".ipynb")):
            continue
        name = next((m for m, r in modules.items() if r == rel), "")
        tree = _tree(rel, root)
        found = imported(tree, name, rel.endswith("__init__.py"), modules)
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        found |= strings & set(modules)
        for m in found:
            todo += [modules[p] for p in (".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 2)) if p in modules]
        todo += [notebooks[s] for s in strings & set(notebooks)]
        data = (Path(root) / rel).parent / "data"
        todo += [(data / s).relative_to(root).as_posix() for s in strings
                 if s.endswith(".pt") and "/" not in s and (data / s).is_file()]
    return sorted(seen)


def _git(*args, root=REPO):
    res = subprocess.run(["git", *args], cwd=root, capture_output=True)
    return res.stdout if res.returncode == 0 else None


# ----------------------------------------------------------------------------- the record of a run
def commit(root=REPO):
    """The short hash of the clone's HEAD, with "+changes" when its working tree differs from it."""
    head = (_git("rev-parse", "--short", "HEAD", root=root) or b"").decode().strip()
    dirty = (_git("status", "--porcelain", "--untracked-files=no", root=root) or b"").strip()
    return (head or "unknown") + ("+changes" if dirty else "")


def today():
    """The date and time of a run, UTC."""
    from datetime import datetime, timezone
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _cpuinfo(key):
    """The value of the first ``key`` line of /proc/cpuinfo ("" where it cannot be read)."""
    try:
        return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith(key)), "")
    except OSError:
        return ""


def cpu_model():
    """The CPU's model name ("AMD EPYC ..."; "" where /proc/cpuinfo cannot be read)."""
    return _cpuinfo("model name")


def cpu_flags():
    """The CPU's vector extensions that matter to torch's kernels: {"avx2": bool, "avx512": bool}
    (from /proc/cpuinfo; both False where it cannot be read)."""
    flags = set(_cpuinfo("flags").split())
    return {"avx2": "avx2" in flags, "avx512": "avx512f" in flags}


def capability():
    """torch's CPU kernels in this process ("AVX512", "AVX2", "DEFAULT", ...; ATEN_CPU_CAPABILITY
    lowers it)."""
    import torch
    return torch.backends.cpu.get_cpu_capability()


def machine():
    """The machine a figure is measured on, in one line: system, CPU, cores, memory, load, Python, torch
    and its threads, the CPU's vector extensions and the kernels torch runs."""
    import torch
    cpu = cpu_model() or platform.processor() or platform.machine()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
        mem_txt = f", {mem:.1f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        mem_txt = ""
    load = f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    flags = cpu_flags()
    vector = "AVX-512" if flags["avx512"] else "AVX2 only" if flags["avx2"] else "no AVX2"
    threads = torch.get_num_threads()
    return (f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores{mem_txt}{load}; "
            f"Python {platform.python_version()}, torch {torch.__version__} "
            f"({threads} thread{'s' if threads > 1 else ''}); "
            f"CPU flags: {vector}, torch kernels {capability()}")


def changed_since(name, data, root=REPO):
    """The files whose code differs from what the results ``data`` measured ([] when current): by the
    digests the results record, else against the commit they name (git), else unknown."""
    tests = data.get("ledger_tests")                  # the science table's: the tests its ledger ran
    if data.get("fingerprint") and data["fingerprint"] == fingerprint(name, root, tests):
        return []
    now = inputs(name, root, tests)
    if "inputs" in data:
        then = data["inputs"]
        return sorted(f for f in set(now) | set(then) if now.get(f) != then.get(f))
    commit = str(data.get("commit", "")).split("+")[0]
    paths = MEASURED.get(name) or sorted(now)
    diff = _git("diff", "--name-only", commit, "--", *paths, root=root) if commit else None
    if diff is None:
        return [f"(which files is not known: the results record {'a commit this clone does not have' if commit else 'no commit'} "
                "and no digests)"]
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", *paths, root=root) or b""
    changed = []
    for rel in sorted(set(diff.decode().split()) | set(untracked.decode().split())):
        if rel not in paths and not rel.endswith((".py", ".ipynb", ".pt")):
            continue                                   # not a file the figure measured (a README, a PNG)
        old = _git("show", f"{commit}:{rel}", root=root)
        then = None if old is None else hashlib.sha256(_code(rel, old)).hexdigest()[:16]
        if then != now.get(rel):
            changed.append(rel)
    if not changed and data.get("fingerprint"):
        return ["(torch's version)"]
    return changed


def results(name, folder=None):
    path = (folder or RESULTS) / name
    return json.loads(path.read_text()) if path.exists() else None


def stale_report(root=REPO, folder=None):
    """One line per stale figure (empty when every committed figure measured the current files).
    folder: where the results are (benchmarks/results by default)."""
    lines = []
    for name in REMAKE:
        data = results(name, folder)
        if data is None:
            lines.append(f"benchmarks/results/{name} is missing ({REMAKE[name]} makes it)")
            continue
        try:
            changed = changed_since(name, data, root)
        except Exception as err:  # noqa: BLE001 -- a warning must not turn into an error
            changed = [f"(could not tell: {type(err).__name__}: {err})"]
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            lines.append(f"benchmarks/results/{name} (commit {data.get('commit', '?')}) is stale: changed since: "
                         f"{shown} (re-measure: {REMAKE[name]})")
    from course_staff.beyond.results import CACHE_PATH, last_build, load_cache
    if load_cache() is None:
        lines.append("course_staff/beyond/data/beyond_ppo_results.json (a cache) is stale: the Beyond PPO notebook "
                     f"and its test rebuild it on their next run ({last_build(CACHE_PATH)}rebuild: "
                     "python -m course_staff.beyond.results --rebuild)")
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
