"""python -m course_staff.hub install | start [--root R] [--prefix P] | stop [--root R]"""

import argparse
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course_staff.course import CLASS_LABS, REPO, assigned, labs
from course_staff.hub import (COURSE, DEFAULT_ROOT, HERE, JUPYTERHUB, PROXY, accounts, exchange, server_python,
                              layout, server_environment)

VENV = REPO / ".venv"
PROXY_BIN = VENV / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
# what the instructor's home (the course directory) gets from the checkout: source/ and release/ of the
# labs the class assigns only (labs.txt, when there is one, with them)
COURSE_FILES = ["nbgrader_config.py", "source", "release", "course_staff", CLASS_LABS]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "hub")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(*cmd, user=None, cwd=None, env=None, timeout=600):
    """Run ``cmd`` (as ``user`` with runuser when given); raise with its output when it fails."""
    full = ([shutil.which("runuser") or "/usr/sbin/runuser", "-u", user, "--"] if user else []) + [str(c) for c in cmd]
    proc = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


# -- install ---------------------------------------------------------------------------------------

def install():
    """jupyterhub==JUPYTERHUB into .venv and configurable-http-proxy@PROXY into .venv/proxy, at once
    (npm waits on the network while pip unpacks)."""
    npm = None
    if not PROXY_BIN.exists():
        if not shutil.which("npm"):
            raise SystemExit("JupyterHub needs configurable-http-proxy (Node.js) and there is no npm "
                             "to install it with: install Node.js and npm (Debian: apt-get install "
                             f"nodejs npm), then run `make hub` again (it installs "
                             f"configurable-http-proxy@{PROXY} into .venv/proxy)")
        print(f"installing configurable-http-proxy@{PROXY} into {PROXY_BIN.parents[2]} with npm")
        npm = subprocess.Popen([shutil.which("npm"), "install", "--silent", "--no-audit", "--no-fund",
                                "--prefix", str(PROXY_BIN.parents[2]), f"configurable-http-proxy@{PROXY}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        import jupyterhub
        have = jupyterhub.__version__
    except ImportError:
        have = None
    try:
        if have != JUPYTERHUB:
            print(f"installing jupyterhub=={JUPYTERHUB} into {VENV}")
            _run(VENV / "bin" / "python", "-m", "pip", "install", "--quiet", f"jupyterhub=={JUPYTERHUB}")
    except BaseException:
        if npm is not None:
            npm.kill()                                   # no install left running behind a failure
        raise
    if npm is not None:
        output, _ = npm.communicate(timeout=600)
        if npm.returncode != 0:
            raise RuntimeError(f"{' '.join(npm.args)} exited {npm.returncode}:\n{output}")
    version = _run(PROXY_BIN, "--version").strip()
    if version != PROXY:
        raise SystemExit(f"{PROXY_BIN} is version {version}, the hub pins {PROXY}: "
                         f"rm -r {PROXY_BIN.parents[2]} and run `make hub` again")
    print(f"jupyterhub {JUPYTERHUB}, configurable-http-proxy {version}")


# -- the gradebook ---------------------------------------------------------------------------------

def _postgres(folder):
    """Start `make postgres`'s server in ``folder``, give its role a password and require it for
    every TCP connection (it trusts them all): the students are local users too.
    Returns (gradebook URL, hub database URL)."""
    _run(VENV / "bin" / "python", "-m", "course_staff.grading.postgres", "start", folder, cwd=REPO)
    server = json.loads((Path(folder) / "server.json").read_text())
    password = secrets.token_urlsafe(18)
    import psycopg
    base = f"postgresql://nbgrader@127.0.0.1:{server['port']}"
    with psycopg.connect(f"{base}/rl_for_llms", autocommit=True) as conn:
        conn.execute(f"ALTER ROLE nbgrader PASSWORD '{password}'")
        conn.execute("CREATE DATABASE jupyterhub")
        hba = Path(server["data"]) / "cluster" / "pg_hba.conf"
        lines = [(ln.replace("trust", "scram-sha-256") if ln.startswith("host") else ln)
                 for ln in hba.read_text().splitlines()]
        hba.write_text("\n".join(lines) + "\n")
        conn.execute("SELECT pg_reload_conf()")
    auth = f"postgresql://nbgrader:{password}@127.0.0.1:{server['port']}"
    return f"{auth}/rl_for_llms", f"postgresql+psycopg://nbgrader:{password}@127.0.0.1:{server['port']}/jupyterhub"


# -- start -----------------------------------------------------------------------------------------

def _write_config(paths, exchange_root):
    etc = paths["etc"]
    (etc / "common").mkdir(parents=True)
    (etc / "common" / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE!r}\n"
        f"c.Exchange.root = {str(exchange_root)!r}\n")
    # Formgrader and the Assignments tab open in an iframe of the lab, which the single-user server
    # of JupyterHub forbids unless told otherwise (a blank "refused to connect" tab)
    (etc / "common" / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"tornado_settings": {
        "headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}}}, indent=1))
    student = etc / "student"
    (student / "labconfig").mkdir(parents=True)
    # Validate runs the pre-submission check's file checks first (course_utils/validate_hook.py)
    (student / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"jpserver_extensions": {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.course_list": False,
        "nbgrader.server_extensions.validate_assignment": False,
        "course_utils.validate_hook": True}}}, indent=1))
    (student / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {
        "@jupyter/nbgrader:formgrader": True, "@jupyter/nbgrader:course-list": True,
        "@jupyter/nbgrader:create-assignment": True}}, indent=1))
    (etc / "instructor").mkdir()        # the instructor keeps every nbgrader extension
    for path in [etc, *etc.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _ignored(folder, names, root=REPO):
    """What the course folder leaves out of ``folder`` (shutil.copytree's ignore): build leftovers, the hub,
    and in source/ and release/ the labs the class does not assign."""
    left_out = set(labs(root)) - set(assigned(root)) if Path(folder) in (root / "source", root / "release") else set()
    return IGNORED(folder, names) | (left_out & set(names))


def _course_folder(instructor):
    """The instructor's home becomes the course directory (nbgrader_config.py's folder)."""
    pw = pwd.getpwnam(instructor)
    home = Path(pw.pw_dir)
    for name in COURSE_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, home / name, ignore=_ignored)
        elif src.exists():
            shutil.copy2(src, home / name)
    _run("chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", home)


def _wait_for(url, proc, log, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyterhub exited with {proc.returncode}:\n{Path(log).read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/hub/api", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"jupyterhub did not answer within {timeout_s} s:\n{Path(log).read_text()[-4000:]}")


def _cannot_start(root, prefix):
    """Why ``start`` must not begin (a message), or None."""
    paths, names = layout(root), accounts.users(prefix)
    if paths["state"].exists():
        return f"a hub is recorded in {paths['state']}: `make hub-stop` first"
    if not PROXY_BIN.exists():
        return "configurable-http-proxy is missing: `make hub` installs it (python -m course_staff.hub install)"
    taken = [n for n in [names["instructor"], *names["students"]] if accounts.exists(n)]
    if taken:
        return f"users {', '.join(taken)} exist already: `make hub-stop` first, or another --prefix"
    return None


def _wait_for_port(port, proc, log, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"configurable-http-proxy exited with {proc.returncode}:\n{Path(log).read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise RuntimeError(f"configurable-http-proxy did not listen within {timeout_s} s:\n{Path(log).read_text()[-3000:]}")


def _timed(what, function, *args, **kwargs):
    """``function(*args, **kwargs)``, then print ``what`` and the seconds it took."""
    t0 = time.monotonic()
    result = function(*args, **kwargs)
    print(f"{what}: {time.monotonic() - t0:.0f} s", flush=True)
    return result


def _servers_python(paths):
    """The student edition, then the servers' Python made with it; returns its LD_LIBRARY_PATH folder."""
    _timed(f"student edition -> {paths['edition']}", _run, VENV / "bin" / "python", "-m",
           "course_staff.edition.student_edition", paths["edition"], cwd=REPO)
    lib = _timed(f"servers' Python -> {paths['env']}", server_python.build, VENV, paths["env"], paths["edition"],
                 paths["python"])
    problems = server_python.leftovers(paths["env"], lib)
    if problems:
        raise RuntimeError(f"the servers' Python reaches the checkout: {problems}")
    return lib


def start(root, prefix):
    accounts.require_root()
    paths, names = layout(root), accounts.users(prefix)
    root = paths["root"]
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    paths["hub"].mkdir(mode=0o700)
    state = {"root": str(root), "prefix": prefix, "users": {}, "hub_dir": str(paths["hub"])}
    paths["state"].write_text(json.dumps(state))     # from here on, `stop` can undo what follows
    paths["state"].chmod(0o600)

    t0 = time.monotonic()
    # three independent parts at once (one mostly waits on pip and the disk, one on PostgreSQL's start,
    # one on useradd): the servers' Python, the gradebook, the users and their folders; leaving the
    # `with`, every part has ended (a failure is raised then, and `stop` undoes what was made)
    with ThreadPoolExecutor(max_workers=2) as pool:
        servers_python = pool.submit(_servers_python, paths)
        gradebook = pool.submit(_timed, f"gradebook and hub database -> PostgreSQL in {paths['postgres']}",
                                _postgres, paths["postgres"])
        for name in [names["instructor"], *names["students"]]:
            state["users"][name] = accounts.create(name)
            paths["state"].write_text(json.dumps(state))
        _course_folder(names["instructor"])
        exchange.make(paths["exchange"], names["instructor"])
        _write_config(paths, paths["exchange"])
        print(f"users, course folder, exchange: {time.monotonic() - t0:.0f} s", flush=True)
        lib = servers_python.result()
        db_url, hub_db_url = gradebook.result()
    port = _free_port()
    state.update(
        url=f"http://127.0.0.1:{port}", hub_port=_free_port(), proxy_api_port=_free_port(),
        proxy=str(PROXY_BIN), env=str(paths["env"]), etc=str(paths["etc"]),
        exchange=str(paths["exchange"]), db_url=db_url, ld_library_path=lib, hub_db_url=hub_db_url,
        instructor=names["instructor"], students=names["students"])
    paths["state"].write_text(json.dumps(state))
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the gradebook knows the labs before anyone opens Formgrader (as `make record` does): recorded
        # while the proxy and the hub start (the hub has a database of its own)
        home = pwd.getpwnam(names["instructor"]).pw_dir
        recorded = pool.submit(_timed, "the labs recorded in the gradebook", _run, paths["env"] / "bin" / "python",
                               "-m", "course_staff.grading.class_grading", "record", *assigned(),
                               user=names["instructor"], cwd=home,
                               env={**server_environment(state, names["instructor"]), "HOME": home})
        _start_hub(paths, state, port)
        recorded.result()
    print(f"\nJupyterHub {JUPYTERHUB} at {state['url']}  (ready in {time.monotonic() - t0:.0f} s; "
          f"log: {paths['hub'] / 'jupyterhub.log'})\n")
    for name, password in state["users"].items():
        role = "instructor (Formgrader)" if name == names["instructor"] else "student (Assignments)"
        print(f"  {name:<18} password {password:<14} {role}")
    print(f"\nexchange {paths['exchange']}; gradebook on PostgreSQL (NBGRADER_DB_URL in the "
          f"instructor's server); `make hub-stop` removes it all")
    return state


def _start_hub(paths, state, port):
    """Start configurable-http-proxy on ``port``, then JupyterHub; return once the hub answers. Their pids
    go into ``state`` (and hub.json) as soon as they run: `stop` ends them."""
    t0 = time.monotonic()
    log = paths["hub"] / "jupyterhub.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBGRADER", "JUPYTER", "PYTHON"))}
    env.update(COURSE_HUB_STATE=str(paths["state"]), PATH=f"{VENV / 'bin'}:{env.get('PATH', '')}",
               PYTHONPATH=str(REPO), CONFIGPROXY_AUTH_TOKEN=secrets.token_hex(32))
    with open(paths["hub"] / "proxy.log", "w") as out:
        proxy = subprocess.Popen([str(PROXY_BIN), "--ip", "127.0.0.1", "--port", str(port),
                                  "--api-ip", "127.0.0.1", "--api-port", str(state["proxy_api_port"]),
                                  "--error-target", f"http://127.0.0.1:{state['hub_port']}/hub/error"],
                                 env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    state["proxy_pid"] = proxy.pid
    paths["state"].write_text(json.dumps(state))
    _wait_for_port(state["proxy_api_port"], proxy, paths["hub"] / "proxy.log")
    with open(log, "w") as out:     # the hub runs as root from .venv (it imports course_staff.hub)
        proc = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
                                cwd=paths["hub"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    state["pid"] = proc.pid
    paths["state"].write_text(json.dumps(state))
    _wait_for(state["url"], proc, log)
    print(f"the proxy and the hub started: {time.monotonic() - t0:.0f} s", flush=True)


# -- stop ------------------------------------------------------------------------------------------

def stop(root):
    """Undo ``start``: the hub and the proxy, every user's processes, the users and their homes,
    the PostgreSQL server, ROOT."""
    accounts.require_root()
    paths = layout(root)
    if not paths["state"].exists():
        print(f"no hub recorded in {paths['state']}: nothing to stop")
        if paths["root"].exists():
            shutil.rmtree(paths["root"], ignore_errors=True)
        return
    state = json.loads(paths["state"].read_text())
    pid = state.get("pid")
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)                 # the hub stops the servers and the proxy
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.2)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if state.get("proxy_pid"):
        try:
            os.kill(state["proxy_pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    for name in state.get("users", {}):
        accounts.remove(name)
        print(f"user {name} removed, with its home")
    if (paths["postgres"] / "server.json").exists():
        _run(VENV / "bin" / "python", "-m", "course_staff.grading.postgres", "stop", paths["postgres"], cwd=REPO)
        print("PostgreSQL stopped, its data deleted")
    shutil.rmtree(paths["root"], ignore_errors=True)
    print(f"{paths['root']} removed (exchange, servers' Python, hub state)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_staff.hub")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install")
    for name in ("start", "stop"):
        p = sub.add_parser(name)
        p.add_argument("--root", type=Path, default=DEFAULT_ROOT)
        if name == "start":
            p.add_argument("--prefix", default="rl", help="user names: PREFIX-instructor, PREFIX-student1, ...")
    args = parser.parse_args(argv)
    try:
        if args.command != "install":
            accounts.require_root()
        if args.command == "install":
            install()
        elif args.command == "start":
            refusal = _cannot_start(args.root, args.prefix)
            if refusal:                        # before anything is made: nothing to undo
                print(refusal, file=sys.stderr)
                return 1
            try:
                start(args.root, args.prefix)
            except BaseException:
                print("start failed: undoing what it made (make hub-stop)", file=sys.stderr)
                stop(args.root)
                raise
        else:
            stop(args.root)
    except accounts.NotRoot as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
