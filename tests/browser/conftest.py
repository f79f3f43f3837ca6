"""Fixtures for the browser tests: Debian's chromium driven by Playwright, one JupyterLab per session.

The server runs the repository's own Jupyter (the interpreter running pytest) on a free loopback port,
with a random token, on a temporary copy of the notebooks, and with settings that keep the screen
quiet (no news pop-up, no update check) and every cell in the page (no windowing).

Without chromium the tests are skipped, unless COURSE_REQUIRE_BROWSER=1 (set by .ci/run): then they fail.
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from jupyter_client.manager import AsyncKernelManager

from tests import requirements
from tests.browser import jlab
from course_staff.course import REPO

ARTIFACTS = REPO / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# what the server serves: notebooks as students and instructors open them
COPIED = ["source", "release", "notebooks"]
# JupyterLab user settings for a quiet, fully rendered notebook: {plugin id: settings}
SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "browser: drives JupyterLab in a real browser (chromium)")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skip_or_fail(reason):
    requirements.missing("browser", reason)


def _chromium_or_skip():
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"{CHROMIUM} not found: install Debian's chromium (make browser) to run the browser tests")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for a test file (Playwright gives each launch a fresh profile). Not for the
    session: while Playwright's sync API is open its event loop reads as running in this thread, so every
    later test file of the worker would find a running loop (asyncio.run refuses to start; a view would
    take it for a kernel's). Under `make test` each browser file has a worker's session to itself anyway."""
    executable = _chromium_or_skip()
    try:
        from playwright import sync_api
    except ImportError:
        _skip_or_fail("Playwright for Python is not installed (make setup installs the dev extras)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """A fresh JupyterLab on a temporary copy of the notebooks: yields {"url", "token", "root", "log",
    "runtime"} (runtime: its kernels' connection files). It needs no browser: a notebook client may run a
    notebook in one of its kernels (``server_kernel``) for the browser to look at afterwards."""
    tmp = tmp_path_factory.mktemp("jlab")
    root = tmp / "course"
    for name in COPIED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, root / name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    settings = tmp / "settings"
    for plugin, values in SETTINGS.items():     # <dir>/@scope/extension/plugin.jupyterlab-settings
        package, name = plugin.split(":")
        (settings / package).mkdir(parents=True, exist_ok=True)
        (settings / package / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    for d in ("workspaces", "runtime", "config", "data"):
        (tmp / d).mkdir()

    env = {k: v for k, v in os.environ.items() if not k.startswith("NBGRADER")}  # full runs, not autograde ones
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTER_CONFIG_DIR=str(tmp / "config"),     # ignore the user's own Jupyter config
        MPLBACKEND="module://matplotlib_inline.backend_inline",
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_TOKEN", None)
    token = secrets.token_hex(16)
    port = _free_port()
    jupyter = [sys.executable, "-m", "jupyter", "lab"]
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen(
        jupyter + ["--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--port={port}",
                   "--ServerApp.port_retries=0", f"--ServerApp.token={token}",
                   f"--ServerApp.root_dir={root}",
                   "--LabApp.expose_app_in_browser=True"],    # window.jupyterapp: jlab.open_notebook
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n"
                                   + (tmp / "server.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("jupyter lab did not answer within 90 s:\n"
                                   + (tmp / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        with ThreadPoolExecutor(max_workers=1) as shutdowns:
            yield {"url": url, "token": token, "root": root, "log": tmp / "server.log", "runtime": tmp / "runtime",
                   "shutdowns": shutdowns}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)     # the server and the kernels it started
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()


@pytest.fixture(scope="module")
def tab(browser):
    """One browser page for a file's notebook tests: JupyterLab loads in it once and each test opens
    its notebook in that app (jlab.open_notebook), as a student opens one notebook after another."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


@pytest.fixture
def page(tab, request):
    """The session's browser page for one test; a screenshot is saved when the test fails, and the page
    is emptied then (the next test loads JupyterLab afresh)."""
    yield tab
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        if "browser step failed" not in str(rep.longrepr):
            # a failure outside a step (a step saves its own screenshot)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / f"FAILED-{request.node.name.replace('/', '_')}.png"
            try:
                tab.screenshot(path=str(shot))
                print(f"\nscreenshot of the failure: {shot}")
            except Exception as exc:   # the page may be gone
                print(f"\nno screenshot of the failure: {exc}")
        try:
            tab.goto("about:blank")
        except Exception as exc:       # noqa: BLE001 -- the next test's goto says more
            print(f"\ncould not empty the page: {exc}")


def api(server, method, path, body=None):
    """The server's REST API: the decoded JSON answer (None when empty)."""
    req = urllib.request.Request(f"{server['url']}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"token {server['token']}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        body = r.read()
    return json.loads(body) if body else None


@pytest.fixture
def lab_page(lab_server, page, request):
    """(page, server) for one notebook test. Afterwards its notebooks are closed in the page, and the
    kernels it started are shut down (not those of a module's fixture, ``server_kernel``'s), in the
    background: the next test need not wait for them to exit."""
    before = {kernel["id"] for kernel in api(lab_server, "GET", "/api/kernels")}
    yield page, lab_server
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.failed:       # a failed test's page stays as it is, for its screenshot
        jlab.close_notebooks(page)
    try:
        started = [kernel["id"] for kernel in api(lab_server, "GET", "/api/kernels") if kernel["id"] not in before]
    except OSError as exc:
        print(f"\ncould not list the kernels: {exc}")
        return
    lab_server["shutdowns"].submit(_shut_down, lab_server, started)


def _shut_down(server, kernels):
    for kernel in kernels:
        try:
            api(server, "DELETE", f"/api/kernels/{kernel}")
        except OSError as exc:
            print(f"\ncould not shut down kernel {kernel}: {exc}")


class ServerKernel(AsyncKernelManager):
    """jupyter_client's stock AsyncKernelManager for a kernel that JupyterLab's server started and owns
    (``owns_kernel=False``: it never stops it): its client is the stock AsyncKernelClient, what
    ``jupyter nbconvert --execute`` talks to a kernel with. ``has_kernel``: nbclient starts none."""

    has_kernel = True


@contextlib.contextmanager
def server_kernel(server, relpath):
    """A kernel of ``server``'s session for the notebook at ``relpath`` (as JupyterLab starts one when the
    notebook is opened): yields a ServerKernel connected to it; the session and its kernel are deleted
    afterwards. A browser that opens ``relpath`` later joins this kernel, with the widgets it holds."""
    session = api(server, "POST", "/api/sessions",
                  {"path": relpath, "type": "notebook", "name": Path(relpath).name, "kernel": {"name": "python3"}})
    try:
        km = ServerKernel(owns_kernel=False,
                          connection_file=str(server["runtime"] / f"kernel-{session['kernel']['id']}.json"))
        km.load_connection_file()
        yield km
    finally:
        try:
            api(server, "DELETE", f"/api/sessions/{session['id']}")
        except OSError as exc:
            print(f"\ncould not delete the session of {relpath}: {exc}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "call":
        item.rep_call = rep
    return rep
