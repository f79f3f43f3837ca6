"""The Python that runs the hub and every user's server: the course's .venv less the course.

    build(venv=".venv", env=ROOT/env, edition=ROOT/edition)

A hard-linked copy of .venv (seconds, no second torch on disk; a plain copy where ROOT is on
another filesystem), its scripts pointed at the copy, the course's editable install removed (it
would make ``course_staff`` and the checkout importable) and ``course_utils`` installed from the
student edition instead (``make student-edition``): what a student's image holds. JupyterLab's
settings overrides keep its screen quiet (no news, no update check).
"""

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

# JupyterLab settings for every user: {plugin id: settings}
OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
}


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def _replace(path, data):
    """Write ``data`` to ``path`` as a new file (a hard link's other name keeps its content)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o755 if os.access(path, os.X_OK) else 0o644)
    os.replace(tmp, path)


def _repoint_scripts(env, venv):
    old, new = str(Path(venv).resolve()).encode(), str(env).encode()
    for script in (env / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(b"#!") and old in data:
            _replace(script, data.replace(old, new))


def _reachable_by_all(path):
    """True when every user can run ``path``: it and each folder above it have o+x."""
    path = Path(path).resolve()
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _base_for_all(env, copy_to):
    """Point ``env`` at an interpreter every user can run; returns the folder of its shared
    library when the servers need it on LD_LIBRARY_PATH, else None.

    A venv made from a Python under a private folder (pyenv in /root) works for root only. Then the
    same Python is copied (hard links) to ``copy_to``: the very build the packages were installed
    with (a system Python of the same version is not: Debian's 3.11.2 fails in soupsieve, which the
    formgrader's pages use, where pyenv's 3.11.7 works). Such a build finds its libpython through
    an absolute path into the private folder, hence LD_LIBRARY_PATH."""
    cfg = env / "pyvenv.cfg"
    fields = dict(line.split(" = ", 1) for line in cfg.read_text().splitlines() if " = " in line)
    base = (Path(fields["home"]) / "python3").resolve()
    if _reachable_by_all(base):
        return None
    prefix = base.parent.parent
    shutil.copytree(prefix, copy_to, symlinks=True, copy_function=_link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__", "site-packages", "test", "tests"))
    os.chmod(copy_to, 0o755)
    python = Path(copy_to) / "bin" / base.name
    fields.update(home=str(python.parent), executable=str(python))
    fields.pop("command", None)
    cfg.unlink()
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in fields.items()))
    for link in (env / "bin").iterdir():
        if link.is_symlink() and Path(os.readlink(link)).is_absolute():
            link.unlink()
            link.symlink_to(python)
    lib = Path(copy_to) / "lib"
    return str(lib) if list(lib.glob("libpython*.so*")) else None


def build(venv, env, edition, python_copy):
    """Make ``env`` from ``venv`` and the student edition at ``edition``. Returns the folder to put
    on LD_LIBRARY_PATH (None: none needed); ``python_copy``: where a private base Python goes."""
    venv, env = Path(venv).resolve(), Path(env)
    shutil.copytree(venv, env, symlinks=True, copy_function=_link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__", "proxy"))
    _repoint_scripts(env, venv)
    lib = _base_for_all(env, Path(python_copy))
    py = env / "bin" / "python"
    run_env = {**os.environ, **({"LD_LIBRARY_PATH": lib} if lib else {})}
    # one pip run replaces the editable install with the edition's package: built with the setuptools
    # the env holds (no isolated build env to download and install first) and nothing fetched
    step = ["-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", "--no-build-isolation",
            "--no-index", str(edition)]
    proc = subprocess.run([str(py), *step], capture_output=True, text=True, env=run_env)
    if proc.returncode != 0:
        raise RuntimeError(f"{py} {' '.join(step)} failed:\n{proc.stdout}{proc.stderr}")
    settings = env / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    target = settings / "overrides.json"
    if target.exists():
        target.unlink()
    target.write_text(json.dumps(OVERRIDES, indent=1))
    os.chmod(env, 0o755)
    return lib


def leftovers(env, lib=None):
    """What of the course's checkout the env could import (must be empty): a message per problem."""
    code = ("import importlib.util as u, sys\n"
            "for name in ('course_staff', 'tests', 'harness'):\n"
            "    if u.find_spec(name): print(name, 'importable')\n"
            "import course_utils; print('course_utils from', course_utils.__file__)\n")
    out = subprocess.run([str(Path(env) / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         cwd="/", check=True, env={"PATH": "/usr/bin:/bin", **({"LD_LIBRARY_PATH": lib} if lib else {})}).stdout
    return [line for line in out.splitlines() if "importable" in line
            or (line.startswith("course_utils from") and str(Path(env)) not in line)]


