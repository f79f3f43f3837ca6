"""The student edition: the course as students get it, without solutions, hidden tests or graders' code.

    python -m course_staff.edition.student_edition DEST [--git]     # or: make student-edition DEST=... [GIT=1]

DEST (new, or an empty folder) receives exactly what ``FILES`` and ``WRITTEN`` list below:

    lab11/lab11.ipynb, lab12/...    each release/<lab>/ folder of the labs the class assigns
                                    (course.assigned), laid out as nbgrader's Assignments tab fetches
                                    it (a folder per lab, named after it)
    notebooks/00_start_here.ipynb   the start-here notebook (only that one of notebooks/)
    course_utils/                   the student package, with its data/
    README.md, Makefile, .gitignore written for students (course_staff/edition/files/); the README's
                                    lines that end in <!-- labNN --> only for a lab the class assigns
    pyproject.toml, environment.yml install course_utils with this repository's pins, less the
                                    graders' tools (STAFF_ONLY) and every dev/test extra

The edition is written next to DEST, searched for secrets (``course_staff.edition.leaks``) and only then
moved to DEST; with --git it becomes a git repository with one commit, ready to publish.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from course_staff import course
from course_staff.course import REPO
from course_staff.edition.leaks import files_of, leaks
FILES = {                                   # edition path: repository path (a file or a folder)
    "notebooks/00_start_here.ipynb": "notebooks/00_start_here.ipynb",
    "course_utils": "course_utils",
    "Makefile": "course_staff/edition/files/Makefile",
    ".gitignore": "course_staff/edition/files/gitignore",
}
# the index the edition installs torch from on Linux (files/Makefile's TORCH_INDEX; tests check they agree)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAFF_ONLY = ("nbgrader",)                  # pinned in pyproject.toml for the graders, not for students
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


README = "course_staff/edition/files/README.md"
_LAB_LINE = re.compile(r"\s*<!-- (lab\d+) -->$")       # a README line about one lab only


def labs(root=REPO):
    """{edition folder: release folder} of every lab the class assigns (course.assigned), e.g.
    {"lab11": release/lab11}."""
    return {lab: Path(root) / "release" / lab for lab in course.assigned(root)}


def lab_titles(names):
    """"Labs 11, 12 & 13" of ("lab11", "lab12", "lab13"); "Lab 11" of one."""
    numbers = [name.removeprefix("lab") for name in names]
    return f"Lab {numbers[0]}" if len(numbers) == 1 else f"Labs {', '.join(numbers[:-1])} & {numbers[-1]}"


def readme_text(root=REPO):
    """README.md of the edition: files/README.md with the class's labs filled in ({labs}: "Labs 11 & 12",
    {lab_files}: "`lab11/lab11.ipynb` and `lab12/lab12.ipynb`", {lab_folders}: "lab11/, lab12/"), and
    a line that ends in <!-- labNN --> kept (without the marker) only when the class assigns labNN."""
    names = list(course.assigned(root))
    files = [f"`{lab}/{lab}.ipynb`" for lab in names]
    kept = []
    for line in (Path(root) / README).read_text().splitlines():
        only = _LAB_LINE.search(line)
        if only and only.group(1) not in names:
            continue
        kept.append(_LAB_LINE.sub("", line))
    text = "\n".join(kept) + "\n"
    for field, value in {"{labs}": lab_titles(names), "{lab_folders}": ", ".join(f"{lab}/" for lab in names),
                         "{lab_files}": files[0] if len(files) == 1 else f"{', '.join(files[:-1])} and {files[-1]}"}.items():
        text = text.replace(field, value)
    return text


def project(root=REPO):
    """This repository's [project] and [tool.setuptools] tables of pyproject.toml."""
    data = tomllib.loads((Path(root) / "pyproject.toml").read_text())
    return data["project"], data["tool"]["setuptools"]


def student_requirements(root=REPO):
    """The pinned requirements of course_utils as students install it."""
    deps = project(root)[0]["dependencies"]
    return [d for d in deps if d.split("==")[0] not in STAFF_ONLY]


def _toml_list(items):
    return "[\n" + "".join(f"    {json.dumps(i)},\n" for i in items) + "]"


def pyproject_text(root=REPO):
    """pyproject.toml of the edition: the student package and its pins, nothing else."""
    meta, setuptools = project(root)
    packages = [p for p in setuptools["packages"] if p.split(".")[0] == "course_utils"]
    data = {k: v for k, v in setuptools.get("package-data", {}).items() if k in packages}
    return "\n".join([
        "[build-system]", 'requires = ["setuptools>=68"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", f"name = {json.dumps(meta['name'])}", f"version = {json.dumps(meta['version'])}",
        f"description = {json.dumps(meta['description'])}",
        f"requires-python = {json.dumps(meta['requires-python'])}",
        "# pinned: you, the teaching assistants and the autograder get the same numbers",
        f"dependencies = {_toml_list(student_requirements(root))}", "",
        "[tool.setuptools]", f"packages = {json.dumps(packages)}", "",
        "[tool.setuptools.package-data]", *(f"{k} = {json.dumps(v)}" for k, v in data.items()), ""])


def environment_text(root=REPO):
    """environment.yml of the edition: conda's way to the same packages as pyproject.toml, torch's
    CPU build on Linux (TORCH_CPU_INDEX, as the edition's Makefile)."""
    pins = "".join(f"      - {r}\n" for r in student_requirements(root))
    return ("# conda env create -f environment.yml && conda activate rl-for-llms\n"
            "name: rl-for-llms\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n"
            f"  - pip:\n      - --extra-index-url {TORCH_CPU_INDEX}   # torch's CPU build on Linux, not CUDA's\n"
            f"{pins}      - -e .      # course_utils from this folder\n")


WRITTEN = {"README.md": readme_text, "pyproject.toml": pyproject_text, "environment.yml": environment_text}


def _copy(src, dst):
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, ignore=IGNORED)
    else:
        shutil.copy2(src, dst)


def write(folder, root=REPO):
    """Write the edition's files into ``folder`` (which must not exist yet)."""
    folder, root = Path(folder), Path(root)
    folder.mkdir(parents=True)
    for name, release in labs(root).items():
        _copy(release, folder / name)
    for dst, src in FILES.items():
        _copy(root / src, folder / dst)
    for dst, text in WRITTEN.items():
        (folder / dst).write_text(text(root))


def git_init(folder, root=REPO):
    """Make ``folder`` a git repository with the whole edition (of ``root``'s labs) in one commit."""
    def git(*args):
        subprocess.run(["git", *args], cwd=folder, check=True, stdout=subprocess.DEVNULL)

    git("init", "--quiet", "--initial-branch=main")
    git("add", "--all")
    who = subprocess.run(["git", "config", "user.name"], cwd=folder, capture_output=True, text=True).stdout
    identity = [] if who.strip() else ["-c", "user.name=Course staff", "-c", "user.email=staff@course.invalid"]
    labs = lab_titles(list(course.assigned(root)))
    git(*identity, "commit", "--quiet", "-m", f"Student edition of the course RL for language models, {labs}")


def build(dest, git=False, root=REPO):
    """Write the edition to ``dest`` (absent or empty); refuse, writing nothing, if it leaks a secret."""
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SystemExit(f"{dest} exists and is not empty: give a new or empty folder")
    if dest == Path(root).resolve() or Path(root).resolve() in dest.parents:
        raise SystemExit(f"{dest} is inside this repository: give a folder outside it")
    staging = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        write(staging, root)
        found = leaks(staging, root)
        if found:
            raise SystemExit("The student edition would leak (nothing written):\n  " + "\n  ".join(found))
        if dest.exists():
            dest.rmdir()
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if git:
        git_init(dest, root)
    return dest


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_staff.edition.student_edition", description=__doc__.split("\n")[0])
    parser.add_argument("dest", help="a new or empty folder, outside this repository")
    parser.add_argument("--git", action="store_true", help="make it a git repository with one commit")
    args = parser.parse_args(argv)
    dest = build(args.dest, git=args.git)
    print(f"Student edition written to {dest} ({len(files_of(dest))} files"
          f"{', one git commit' if args.git else ''}); no solution, hidden test or graders' code in it.")


if __name__ == "__main__":
    sys.exit(main())
