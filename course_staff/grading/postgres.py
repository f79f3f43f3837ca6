"""A throwaway PostgreSQL server: the shared gradebook of a large course, on one machine.

    server = Server.start("/tmp/pg")          # initdb + start on a free port of 127.0.0.1
    url = server.create_database("class")     # postgresql://nbgrader@127.0.0.1:<port>/class
    server.stop()                             # stops it and deletes its data

    python -m course_staff.grading.postgres start .postgres    # or: make postgres (prints the export line)
    python -m course_staff.grading.postgres stop .postgres     # or: make postgres-stop
    python -m course_staff.grading.postgres check              # are the server programs installed?

It runs Debian's `postgresql` package (`make postgres-install` installs it when missing): a real
server, the one a course's gradebook runs on, but trusting every local connection and without
fsync -- for the tests and a TA's dry run, never for a term's grades. PostgreSQL refuses to run as
root, so under root the server runs as the `postgres` user that the package creates.
"""

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

USER = "nbgrader"            # the database role every grader connects as
DATABASE = "rl_for_llms"     # the gradebook's database
STATE = "server.json"        # what `start` leaves in its folder for `stop`


class PostgresMissing(RuntimeError):
    """The PostgreSQL server programs (initdb, pg_ctl) are not installed."""


def bindir():
    """The folder holding initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    raise PostgresMissing("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql): "
                          "run `make postgres-install` (Debian: apt-get install postgresql)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user():
    """(uid, gid) to run the server as: ours, or the `postgres` user's when we are root."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresMissing("running as root, and there is no `postgres` user to run the server as "
                              "(Debian's postgresql package creates it)") from None
    return pw.pw_uid, pw.pw_gid


@dataclass
class Server:
    data: str            # the cluster's folder (deleted by stop)
    port: int
    uid: int
    gid: int

    @property
    def url(self):
        return self.url_of(DATABASE)

    def url_of(self, database):
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, program, *args, timeout=60):
        def drop():                              # only under root: become the server's user
            os.setgid(self.gid)
            os.setuid(self.uid)
        proc = subprocess.run([str(bindir() / program), *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, cwd="/",
                              preexec_fn=drop if os.geteuid() == 0 else None)
        if proc.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(map(str, args))} failed:\n{proc.stdout}{proc.stderr}")
        return proc.stdout

    @classmethod
    def start(cls, folder=None):
        """initdb a new cluster in a fresh temporary folder, start it, create the course's database.
        ``folder`` (optional) receives server.json, which `stop` reads."""
        uid, gid = _as_server_user()
        data = tempfile.mkdtemp(prefix="rl-for-llms-pg-")
        os.chown(data, uid, gid)
        server = cls(data=data, port=_free_port(), uid=uid, gid=gid)
        server._run("initdb", "-D", f"{data}/cluster", "-U", USER, "--auth=trust", "-E", "UTF8",
                    "--locale=C", "--no-sync", "--no-instructions", timeout=120)
        options = f"-p {server.port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off " \
                  f"-c full_page_writes=off -c max_connections=200"
        server._run("pg_ctl", "-D", f"{data}/cluster", "-l", f"{data}/server.log", "-o", options,
                    "-w", "-t", "60", "start", timeout=90)
        server.create_database(DATABASE)
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / STATE).write_text(json.dumps(asdict(server)))
        return server

    def create_database(self, name):
        """A new, empty database on this server; returns its URL."""
        self._run("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", USER, name)
        return self.url_of(name)

    def stop(self):
        """Stop the server at once and delete its data."""
        try:
            self._run("pg_ctl", "-D", f"{self.data}/cluster", "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.data, ignore_errors=True)

    @classmethod
    def of(cls, folder):
        """The server that `start` recorded in ``folder``."""
        return cls(**json.loads((Path(folder) / STATE).read_text()))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (argv[:1] == ["check"] and len(argv) == 1 or argv[:1] in (["start"], ["stop"]) and len(argv) == 2):
        print("usage: python -m course_staff.grading.postgres start|stop FOLDER, or: check", file=sys.stderr)
        return 2
    command, folder = argv[0], argv[-1]
    try:
        if command == "check":
            print(f"PostgreSQL server programs in {bindir()}")
        elif command == "start":
            if (Path(folder) / STATE).exists():
                print(f"a server is already recorded in {folder}/{STATE}: "
                      f"`make postgres-stop` first", file=sys.stderr)
                return 1
            server = Server.start(folder)
            print(f"PostgreSQL (throwaway: trusts local connections, no fsync) on port {server.port}, "
                  f"data in {server.data}.\nPoint nbgrader at it with:\n\n"
                  f"  export NBGRADER_DB_URL={server.url}\n")
        else:
            server = Server.of(folder)
            server.stop()
            (Path(folder) / STATE).unlink()
            print(f"PostgreSQL on port {server.port} stopped, {server.data} deleted")
    except PostgresMissing as missing:
        print(missing, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
