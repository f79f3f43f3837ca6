"""A local JupyterHub for a dry run of the course as a class takes it: real Unix users, one exchange.

    python -m course_staff.hub install        # jupyterhub (pinned) into .venv, the proxy from npm
    python -m course_staff.hub start          # or: make hub       (root: it creates Unix users)
    python -m course_staff.hub stop           # or: make hub-stop  (removes all that start made)

``start`` lays out everything under one folder (ROOT, /srv/rl-for-llms-hub unless --root says):

    env/         the servers' Python: a hard-linked copy of .venv without the course's editable
                 install, with course_utils installed from the student edition (no course_staff)
    python/      the base Python of .venv, hard-linked, when the original is not readable by
                 every user (pyenv under /root)
    etc/         Jupyter config per role: every user's nbgrader_config.py (course id, exchange);
                 the students' servers without Formgrader, Course List and Create Assignment,
                 and with the course's Validate (course_utils/validate_hook.py)
    exchange/    nbgrader's exchange, with the permissions of ``exchange.LAYOUT``
    postgres/    the PostgreSQL server of ``make postgres``, password-protected: the gradebook
                 (NBGRADER_DB_URL, the instructor's server only) and the hub's own database
    hub/         JupyterHub's state (cookie secret, log, pid) and hub.json (users, passwords, URL)

and creates the users of ``accounts.users(prefix)``: one instructor, whose home is the course
directory (nbgrader_config.py, source/, release/, course_staff/), and three students. JupyterHub
logs them in with PAM (their Unix passwords) and starts each one's JupyterLab with the
LocalProcessSpawner, as that user. The hub's configuration is ``jupyterhub_config.py`` beside
this file; it reads hub.json.
"""

from pathlib import Path

from course_staff.course import COURSE_ID

JUPYTERHUB = "6.1.1"                 # from PyPI, into .venv (install)
PROXY = "5.3.0"                      # configurable-http-proxy, from npm, into .venv/proxy
COURSE = COURSE_ID                   # nbgrader's course id (course_staff.course)
DEFAULT_ROOT = Path("/srv/rl-for-llms-hub")
HERE = Path(__file__).resolve().parent
STATE = "hub/hub.json"               # under ROOT


def layout(root):
    """{name: path} of what ``start`` makes under ``root``."""
    root = Path(root)
    return {"root": root, "env": root / "env", "etc": root / "etc", "exchange": root / "exchange",
            "postgres": root / "postgres", "hub": root / "hub", "state": root / STATE,
            "edition": root / "edition", "python": root / "python"}


def server_environment(state, name):
    """The environment of user ``name``'s server (and of what the instructor runs as a TA): the
    servers' Python first on PATH, the Jupyter config of the user's role, and for the instructor
    the course folder on PYTHONPATH (its course_staff), the exchange and the gradebook."""
    import pwd

    etc, home = state["etc"], pwd.getpwnam(name).pw_dir
    role = "instructor" if name == state["instructor"] else "student"
    env = {"PATH": f"{state['env']}/bin:/usr/local/bin:/usr/bin:/bin",
           "JUPYTER_CONFIG_PATH": f"{etc}/{role}:{etc}/common",
           "PYTHONNOUSERSITE": "1",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    if state.get("ld_library_path"):
        env["LD_LIBRARY_PATH"] = state["ld_library_path"]
    if role == "instructor":
        env.update(PYTHONPATH=home, NBGRADER_DB_URL=state["db_url"], NBGRADER_EXCHANGE=state["exchange"])
    return env
