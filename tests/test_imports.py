"""The course's packages (course_utils, course_staff, benchmarks, tests) import each other as packages:
no two modules import each other, directly or round a longer loop, and no module edits the import
path (``sys.path``). The import graph is read from the syntax trees (benchmarks/provenance.py:
import_graph), every import counted wherever it stands: a lazy import inside a function closes a loop
as surely as one at the top of a module."""

import re

from benchmarks import provenance

REPO = provenance.REPO
SYS_PATH = "sys" + ".path"          # spelt in two pieces, so that this file does not match its own search
EDIT = re.compile(re.escape(SYS_PATH) + r"\s*(\.\s*(insert|append|extend|remove)\b|\[[^\]]*\]\s*=|\+?=(?!=))")


def sys_path_edits(root=REPO, packages=provenance.PACKAGES):
    """["file:line: text"] of every line of the packages' .py files that edits the import path, in code or
    in code held by a string (``python -c "..."``)."""
    found = []
    for module, rel in provenance.module_files(root, packages).items():
        for n, line in enumerate((root / rel).read_text().splitlines(), 1):
            if EDIT.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def _cycle_text(group, graph):
    """The shortest loop of imports through ``group``'s modules, as a chain: "a -> b -> a"."""
    loops = []
    for start in group:
        paths, seen = [[start]], {start}
        while paths:                                  # breadth first: the first loop found is the shortest
            path = paths.pop(0)
            nxt = sorted(m for m in graph[path[-1]] if m in group)
            if start in nxt:
                loops.append(path + [start])
                break
            for m in nxt:
                if m not in seen:
                    seen.add(m)
                    paths.append(path + [m])
    return " -> ".join(min(loops, key=len))


def test_no_two_modules_import_each_other():
    graph = provenance.import_graph()
    assert len(graph) > 100 and graph["benchmarks.science"], "the graph holds the course's modules and their imports"
    cycles = provenance.import_cycles(graph)
    assert not cycles, "modules that import each other (one concept, one home: move what both need into a "\
        "third module): " + "; ".join(_cycle_text(g, graph) for g in cycles)


def test_no_module_edits_the_import_path():
    edits = sys_path_edits()
    assert not edits, ("the course's packages import each other by name (`from benchmarks import ...`, "
                       f"`from course_staff.testbed import ...`), never through {SYS_PATH}: " + "; ".join(edits))


# ----------------------------------------------------------------------------- the negative controls
def _tree(root, files):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_checks_see_a_cycle_and_a_path_edit(tmp_path):
    """A scratch tree: a pair joined by a lazy import, a loop of three through relative and from-imports,
    and a path edit in a string of code; a module that imports a package of its own is no cycle."""
    _tree(tmp_path, {
        "course_utils/__init__.py": "from course_utils import a\n",
        "course_utils/a.py": "import course_utils.b\n",
        "course_utils/b.py": "def f():\n    from course_utils import a\n    return a\n",
        "benchmarks/__init__.py": "",
        "benchmarks/x.py": "from . import y\n",
        "benchmarks/y.py": "from benchmarks.z import Z\n",
        "benchmarks/z.py": "Z = 1\nif Z:\n    import benchmarks.x\n",
        "tests/__init__.py": "",
        "tests/t.py": f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import sys; {SYS_PATH}.insert(0, \"..\")'])\n",
        "tests/u.py": f"import sys\n{SYS_PATH}[:0] = ['..']\n",
        "tests/v.py": f"import sys\nprint({SYS_PATH} == [])\n",
    })
    graph = provenance.import_graph(tmp_path)
    assert provenance.import_cycles(graph) == [["benchmarks.x", "benchmarks.y", "benchmarks.z"],
                                               ["course_utils.a", "course_utils.b"]]
    assert _cycle_text(["course_utils.a", "course_utils.b"], graph) == "course_utils.a -> course_utils.b -> course_utils.a"
    assert [e.split(":")[0] for e in sys_path_edits(tmp_path)] == ["tests/t.py", "tests/u.py"]
