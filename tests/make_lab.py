"""`make lab` as a test runs it: start it in a folder, wait until JupyterLab answers, stop it again.

    output = make_lab_until_it_answers(folder, env, limit_s=90)    # AssertionError if it never answers
"""

import os
import signal
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_lab_until_it_answers(folder, env, limit_s):
    """Run `make lab` in ``folder`` (set-up included) until JupyterLab answers on its port, then stop
    it; returns what it printed. ``env`` gets BROWSER=true: no browser window from a test."""
    port = free_port()
    proc = subprocess.Popen(["make", "lab", f"PORT={port}"], cwd=folder, env={**env, "BROWSER": "true"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            assert proc.poll() is None, "make lab stopped:\n" + proc.stdout.read().decode()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as reply:
                    assert b'"version"' in reply.read()
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError(f"make lab in {folder}: JupyterLab did not answer within {limit_s} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return proc.stdout.read().decode()
