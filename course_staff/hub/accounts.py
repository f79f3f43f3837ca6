"""The hub's Unix users: one instructor and three students, each with a printed password.

    users("rl")  -> {"instructor": "rl-instructor", "students": ["rl-student1", ...]}
    create("rl-student1")  -> its new password     remove("rl-student1")   (processes, home, user)

Homes are mode 700: what a student fetched, wrote or submitted (nbgrader keeps a copy of each
submission in the home) is theirs alone.
"""

import os
import pwd
import secrets
import signal
import subprocess
import time
from pathlib import Path

STUDENTS = 3


class NotRoot(RuntimeError):
    """Creating Unix users needs root."""


def require_root():
    if os.geteuid() != 0:
        raise NotRoot("the hub creates real Unix users (useradd) and runs each one's server as that "
                      "user: run it as root (sudo make hub), on a machine you may add users to")


def users(prefix):
    return {"instructor": f"{prefix}-instructor",
            "students": [f"{prefix}-student{i}" for i in range(1, STUDENTS + 1)]}


def exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def create(name):
    """A new user with a home of mode 700 and a random password (returned)."""
    require_root()
    if exists(name):
        raise RuntimeError(f"user {name} exists already: `make hub-stop` first (or another prefix)")
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name],
                   check=True, capture_output=True, text=True)
    home = Path(pwd.getpwnam(name).pw_dir)
    home.chmod(0o700)
    password = secrets.token_urlsafe(9)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", check=True, text=True,
                   capture_output=True)
    return password


def pids_of(name):
    """The ids of the processes that run as user ``name`` (its servers, kernels, terminals)."""
    uid = pwd.getpwnam(name).pw_uid
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except FileNotFoundError:
                pass
    return found


def end_processes(name, wait_s=10):
    """SIGTERM each of the user's processes by id, then SIGKILL what is left after ``wait_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_of(name):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pids_of(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not pids_of(name):
            return


def remove(name):
    """End the user's processes, delete the user, its group and its home."""
    require_root()
    if not exists(name):
        return
    end_processes(name)
    subprocess.run(["userdel", "--remove", name], check=False, capture_output=True, text=True)
    if exists(name):
        raise RuntimeError(f"could not remove user {name}")
