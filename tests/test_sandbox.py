"""The grading sandbox against the course's catalogue of attacks (course_staff/grading/sandbox.py).

Two students hand in Lab 11 on a copy of the course: ``mallory``, whose first solution cell is
the instructor's solution plus the attacks below (each in try/except, so the honest checks still
pass), and ``zed``, an honest solution. ``eve``'s solution cell hooks IPython's ``pre_run_cell``
to copy the hidden tests as they run into her outputs and into a file. The class is graded with
nbgrader twice:

- ``sandboxed``: the course as configured (the sandbox, the hook guard, the output scan);
- ``open``: the negative control, nbgrader as it was: SANDBOX=off, no hook guard, no output scan.

Every attack is checked FROM OUTSIDE after grading -- files on disk, the gradebook, the listener
on 127.0.0.1, the autograded notebooks' text -- and must succeed in ``open`` and fail when
sandboxed; zed's grades are the same in both. Limits are set small in the course copy's config
(2 GiB of memory, 64 MiB files), and the bombs are sized so that the open run stays cheap: the
memory bomb maps 6 GiB and touches 64 MiB of it, the file bomb writes one byte at 2 GiB
(a sparse file).
"""

import json
import os
import socket
import sqlite3
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from course_staff.testbed import harness as h
from course_staff.grading import early_kernel, sandbox
from course_staff.grading.nbgrader_plugins import QUOTED, hidden_lines, quoted_hidden_tests

LAB = "lab11"
FIRST = "response_logprobs_solution"           # the solution cell the attacks ride in
SECRET = f"s3cret-{uuid.uuid4().hex[:8]}"      # in the grader's environment, like NBGRADER_DB_URL's password
ATTACKS = ("source", "own_notebook", "env", "other_read", "other_write", "gradebook", "course_utils", "release",
           "network", "processes", "memory", "disk")

def attacks(course, port, marker):
    """mallory's extra lines: every attack in its own try/except; what it got is printed."""
    return textwrap.dedent(f"""
        import os, json, socket, sqlite3, time
        _c = {str(course)!r}
        try:
            _t = open(_c + "/source/{LAB}/{LAB}.ipynb").read()
            print("ATTACK source: read", len(_t), "chars of the hidden tests' notebook")
        except Exception:
            pass
        try:                # the notebook being graded, in the kernel's folder: nbgrader restored its hidden tests
            if "BEGIN HIDDEN TESTS" in open("{LAB}.ipynb").read():
                print("ATTACK own_notebook: the hidden tests are in the folder")
        except Exception:
            pass
        try:
            print("ATTACK env:", os.environ["COURSE_GRADER_SECRET"])
        except Exception:
            pass
        try:
            _z = _c + "/submitted/zed/{LAB}/{LAB}.ipynb"
            _n = json.load(open(_z))
            print("ATTACK other_read:", len(_n["cells"]), "cells of zed's notebook")
            _n["metadata"]["pwned_by"] = "mallory"
            json.dump(_n, open(_z, "w"))
        except Exception:
            pass
        try:
            _db = sqlite3.connect(_c + "/gradebook.db")
            _db.execute("CREATE TABLE pwned (who TEXT)")
            _db.execute("INSERT INTO pwned VALUES ('mallory')")
            _db.commit()
        except Exception:
            pass
        try:
            open({marker!r}, "w").write("mallory")
        except Exception:
            pass
        try:
            open(_c + "/release/{LAB}/pwned.txt", "w").write("mallory")
        except Exception:
            pass
        try:
            _s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
            _s.sendall(b"mallory")
            _s.close()
        except Exception:
            pass
        _kids = []
        try:
            for _i in range(300):
                _p = os.fork()
                if _p == 0:
                    time.sleep(2)
                    os._exit(0)
                _kids.append(_p)
        except Exception:
            pass
        for _p in _kids:
            os.waitpid(_p, 0)
        print("ATTACK processes:", len(_kids), "running at once")
        try:
            import numpy
            _m = numpy.zeros(6 << 30, dtype=numpy.uint8)     # private memory, mapped now, paged in when touched
            _m[: 64 << 20] = 1
            print("ATTACK memory: 6 GiB")
            del _m
        except Exception:
            pass
        try:
            with open("bomb.bin", "wb") as _f:
                _f.seek(2 << 30)
                _f.write(b"x")
            print("ATTACK disk: a 2 GiB file")
        except Exception:
            pass
        """)


def capture(drop):
    """eve's extra lines: copy every cell as it starts into the outputs and into ``drop``."""
    return textwrap.dedent(f"""
        def _spy(info):
            if "HIDDEN" in info.raw_cell:
                print(info.raw_cell)
                try:
                    open({str(drop)!r}, "a").write(info.raw_cell)
                except Exception:
                    pass
        get_ipython().events.register("pre_run_cell", _spy)
        """)


def _with_extra(extra):
    nb = h.solved_submission(LAB)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == FIRST:
            cell.source += "\n" + extra
    return nb


class Listener:
    """A TCP server on 127.0.0.1 that records what each connection sends."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.5)
        self.port, self.heard, self.stop = self.sock.getsockname()[1], [], False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                self.heard.append(conn.recv(100).decode())
            except OSError:
                pass
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def _outputs(course, student):
    path = course / "autograded" / student / LAB / f"{LAB}.ipynb"
    nb = json.loads(path.read_text())
    return "\n".join(json.dumps(c.get("outputs", [])) for c in nb["cells"])


@pytest.fixture(scope="module", params=["sandboxed", "open"])
def graded(request, tmp_path_factory):
    """One class graded in one mode: what the attacks left, read from outside."""
    mode = request.param
    if mode == "sandboxed":
        try:
            sandbox.probe()
        except sandbox.SandboxError as error:
            pytest.fail(f"the sandbox does not start on this machine: {error}")
    tmp = tmp_path_factory.mktemp(f"sandbox-{mode}")
    course = h.course_copy(tmp, labs=[LAB])
    with (course / "nbgrader_config.py").open("a") as config:
        config.write("\nc.SandboxedKernelManager.memory_mb = 2048\nc.SandboxedKernelManager.file_mb = 64\n")
        if mode == "open":
            config.write("c.SurviveKernelDeath.guard_hooks = False\nc.FlagTampering.scan_outputs = False\n")
    marker = Path(sandbox.package_dir("course_utils")) / f"_pwned_{uuid.uuid4().hex[:8]}.txt"
    drop = tmp / "eve-captured.txt"
    listener = Listener()
    subs = {"mallory": _with_extra(attacks(course, listener.port, str(marker))),
            "eve": _with_extra(capture(drop)),
            "zed": h.solved_submission(LAB)}
    for student, nb in subs.items():
        h._write(course / "submitted" / student / LAB / f"{LAB}.ipynb", nb)
    env = {"COURSE_GRADER_SECRET": SECRET, **({"SANDBOX": "off"} if mode == "open" else {})}
    try:
        _, log = h.nbgrader(course, "autograde", LAB, check=False, timeout=900, env=env)
    finally:
        listener.close()
        touched_utils = marker.exists()
        marker.unlink(missing_ok=True)
    grades = h.read_grades(course, LAB, list(subs), log)
    with sqlite3.connect(course / "gradebook.db") as db:
        pwned = db.execute("SELECT name FROM sqlite_master WHERE name = 'pwned'").fetchall()
    mallory = _outputs(course, "mallory")
    zed = json.loads((course / "submitted" / "zed" / LAB / f"{LAB}.ipynb").read_text())
    succeeded = {
        "source": "ATTACK source" in mallory,
        "own_notebook": "ATTACK own_notebook" in mallory,
        "env": SECRET in mallory,
        "other_read": "ATTACK other_read" in mallory,
        "other_write": zed["metadata"].get("pwned_by") == "mallory",
        "gradebook": bool(pwned),
        "course_utils": touched_utils,
        "release": (course / "release" / LAB / "pwned.txt").exists(),
        "network": "mallory" in listener.heard,
        "processes": "ATTACK processes: 300" in mallory,
        "memory": "ATTACK memory" in mallory,
        "disk": "ATTACK disk" in mallory,
    }
    yield dict(mode=mode, course=course, log=log, grades=grades, succeeded=succeeded, drop=drop,
               eve=_outputs(course, "eve"))
    (course / "autograded" / "mallory" / LAB / "bomb.bin").unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_succeeds_only_without_the_sandbox(graded, attack):
    succeeded = graded["succeeded"][attack]
    if graded["mode"] == "open":
        assert succeeded, f"negative control: without the sandbox the attack '{attack}' should succeed"
    else:
        assert not succeeded, f"the attack '{attack}' got through the sandbox"


@pytest.mark.slow
def test_the_capture_of_running_hidden_tests(graded):
    """eve's pre_run_cell hook: open, the hidden tests reach her outputs and her file; sandboxed,
    neither, and every check cell of hers is 0 and waits for a TA."""
    lines = [ln for c in h._read("source", LAB).cells for ln in hidden_lines(c)]
    leaked = [ln for ln in lines if ln in graded["eve"]]
    if graded["mode"] == "open":
        assert leaked and graded["drop"].exists(), "negative control: the capture should work"
        return
    assert not leaked and not graded["drop"].exists()
    eve = graded["grades"]["eve"]
    assert eve and all(not score for gid, score in eve.items() if gid.startswith("test_")), eve
    assert "TAMPERING?" in graded["log"] and "pre_run_cell" in graded["log"]


@pytest.mark.slow
def test_the_honest_student_is_graded_the_same(graded):
    assert graded["grades"]["zed"] == {**h.max_scores(graded["course"], LAB),
                                       **{g: None for g, s in graded["grades"]["zed"].items() if s is None}}


def test_an_output_quoting_a_hidden_test_is_blanked():
    """The output scan (FlagTampering), with its negative control: an honest output passes."""
    import nbformat

    source = h._read("source", LAB)
    hidden = next(c for c in source.cells if hidden_lines(c))
    line = hidden_lines(hidden)[0]
    honest = nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")])
    spy = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", text=f"got {line}\n")])
    assert quoted_hidden_tests([hidden, honest]) == []
    reasons = quoted_hidden_tests([hidden, spy])
    assert reasons and spy.outputs[0]["text"] == QUOTED


def test_sandbox_off_is_explicit_and_warned(monkeypatch, capsys):
    monkeypatch.setenv("SANDBOX", "off")
    assert not sandbox.enabled() and sandbox.warn_if_off()
    assert "UNSANDBOXED" in capsys.readouterr().err
    monkeypatch.delenv("SANDBOX")
    assert sandbox.enabled() and not sandbox.warn_if_off()


def test_no_bubblewrap_stops_grading_with_how_to_install(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox.os, "access", lambda path, mode: False)
    with pytest.raises(SystemExit, match="apt-get install bubblewrap"):
        sandbox.require()


def test_the_kernel_sees_no_secret_no_network_and_a_process_limit(monkeypatch):
    monkeypatch.setenv("COURSE_GRADER_SECRET", SECRET)
    seen = sandbox.probe()
    assert "COURSE_GRADER_SECRET" not in seen["env"] and not seen["network"]
    assert 0 < seen["nproc"] <= 1024 and seen["uid"] != 0


def test_a_venv_and_a_course_under_tmp_stay_visible(monkeypatch, tmp_path):
    """A clone under /tmp (CI's, a TA's scratch copy): the private /tmp is mounted before the venv and the
    course package, so they are bound over it, not hidden by it (the kernel found no python before)."""
    venv, package = "/tmp/clone/.venv", "/tmp/clone/course_utils"
    monkeypatch.setattr(sandbox, "readonly_paths", lambda: ["/usr", venv, package])
    monkeypatch.setattr(sandbox.os.path, "exists", lambda p: True)
    args = sandbox.bwrap_command(["python", "-m", "ipykernel_launcher"], {}, "/tmp/grading/student/lab11",
                                 tmp_path, {})
    binds = [(args[i], args[i + 2]) for i, a in enumerate(args) if a in ("--bind", "--ro-bind-try")]
    order = [dest for _, dest in binds]
    assert order.index("/tmp") < order.index(venv) and order.index("/tmp") < order.index(package)
    assert order.index("/tmp") < order.index("/tmp/grading/student/lab11")
    # and the folders above them are made readable inside the private /tmp, after it is mounted
    made = [args[i + 1] for i, a in enumerate(args) if a == "--dir"]
    assert "/tmp/clone" in made and args.index("--dir") > args.index("/tmp")


def test_the_guard_removes_hooks_that_watch_cells_and_keeps_the_kernels_own():
    """HOOK_GUARD in an IPython shell: what a fresh shell has hooked stays, a cell's pre_run_cell
    hook and trace function go (and are named); run again, nothing is left to remove."""
    from IPython.core.interactiveshell import InteractiveShell

    from course_staff.grading.nbgrader_plugins import HOOK_GUARD

    shell = InteractiveShell()
    try:
        shell.run_cell(HOOK_GUARD, store_history=False)
        fresh = shell.ev("_course_hook_found(None)")
        assert shell.ev(f"_course_hook_found({fresh!r})") == []          # negative control: nothing to remove
        shell.run_cell("import sys\n"
                       "def _spy(info): print(info.raw_cell)\n"
                       "get_ipython().events.register('pre_run_cell', _spy)\n"
                       "sys.settrace(lambda *a: None)")
        removed = shell.ev(f"_course_hook_found({fresh!r})")
        assert any("pre_run_cell hook <function _spy" in r for r in removed) and \
            any(r.startswith("sys.settrace") for r in removed), removed
        assert shell.ev(f"_course_hook_found({fresh!r})") == []
    finally:
        import sys
        sys.settrace(None)
        shell.clear_instance()


def test_a_hidden_line_that_students_also_see_is_no_quote():
    """A line of a hidden test that a visible check carries too (``hint="..."``) may appear in an
    honest traceback of that visible check; only lines students never see count as quoted."""
    import nbformat

    line = 'hint="do not change the inputs in place")'
    hidden = nbformat.v4.new_code_cell(f"x = 1\n### BEGIN HIDDEN TESTS\nassert_close(a, b,\n    {line}\n### END HIDDEN TESTS")
    visible = nbformat.v4.new_code_cell(f"assert_close(c, d,\n    {line}", outputs=[nbformat.v4.new_output(
        "error", ename="AssertionError", evalue="no", traceback=[f"----> 2     {line}"])])
    assert quoted_hidden_tests([hidden, visible]) == []
    visible.source = "assert_close(c, d)"        # negative control: now only the hidden test has it
    assert quoted_hidden_tests([hidden, visible])


def test_a_hidden_line_inside_a_longer_visible_line_is_no_quote():
    """Lab 13's Task 4: the docstring students read spells out ``clip_grad_norm_(...); optimizer.step()``,
    which holds a whole line of the hidden test. A blank submission's traceback shows that docstring:
    it quotes nothing students have not seen, so it is not held as tampering."""
    import nbformat

    line = "torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)"
    hidden = nbformat.v4.new_code_cell(f"x = 1\n### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS")
    given = nbformat.v4.new_code_cell(f'def f():\n    """{line}; optimizer.step()"""\n    raise NotImplementedError',
                                      outputs=[nbformat.v4.new_output(
                                          "error", ename="NotImplementedError", evalue="",
                                          traceback=[f'      2     """{line}; optimizer.step()"""'])])
    assert quoted_hidden_tests([hidden, given]) == []
    given.source = "def f():\n    raise NotImplementedError"    # negative control: the line is seen nowhere
    assert quoted_hidden_tests([hidden, given])


class _Channel:
    """A kernel channel that answers from a script: ``replies(sent ids)`` -> the next message, or None for
    silence (Empty, as after a timeout). Counts the messages it handed out."""

    def __init__(self, replies):
        self.replies, self.sent, self.handed = replies, [], 0

    def send(self, msg):
        self.sent.append(msg["header"]["msg_id"])

    async def get_msg(self, timeout=None):
        import asyncio
        from queue import Empty
        await asyncio.sleep(0)                  # a real channel awaits its socket
        msg = self.replies(self.sent)
        if msg is None:
            raise Empty
        self.handed += 1
        return msg


def _msg(msg_type, parent, **content):
    return {"msg_type": msg_type, "parent_header": {"msg_id": parent}, "content": content, "header": {}}


def _ready(client_class):
    """wait_for_ready of ``client_class`` against a kernel that answers kernel_info on the shell channel, goes
    busy then idle after it on IOPub and then never falls silent (an unrelated stream, e.g. a thread's prints):
    how many IOPub messages the client read before it called the kernel ready (or 100 if it never did)."""
    from course_utils.kernel_client import SteadyKernelClient

    client = client_class()
    shell = _Channel(lambda sent: _msg("kernel_info_reply", sent[-1], status="ok", protocol_version="5.3"))
    script = iter([_msg("iopub_welcome", None), _msg("status", "other", execution_state="idle")])
    states = {}

    def iopub(_):
        sent = shell.sent
        state = states.setdefault(sent[-1], iter(["busy", "idle"]))
        following = next(script, None) or next((_msg("status", sent[-1], execution_state=s) for s in state), None)
        return following or _msg("stream", "a thread", name="stdout", text="tick\n")
    client._shell_channel, client._iopub_channel = shell, _Channel(iopub)

    async def alive():
        return True
    client._async_is_alive = alive
    assert issubclass(client_class, SteadyKernelClient)

    async def run():
        try:
            await asyncio.wait_for(client.wait_for_ready(timeout=5), 5)
        except asyncio.TimeoutError:
            return 100
        return client._iopub_channel.handed
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as thread:       # an event loop of its own (see tests/test_kernel_client.py)
        return thread.submit(asyncio.run, run()).result()


def test_a_sandboxed_kernel_is_ready_once_idle_after_kernel_info():
    """The grader's client calls the kernel ready at the IOPub "idle" that follows its kernel_info request
    (the welcome, another request's idle and the busy before it are read on the way): jupyter_client's
    waits for 0.2 s of IOPub silence, on every graded notebook."""
    assert _ready(sandbox.GraderKernelClient) == 4
    for manager in (sandbox.SandboxedKernelManager, sandbox.GraderKernelManager):      # SANDBOX=off's too
        assert manager(kernel_name="python3").client().__class__ is sandbox.GraderKernelClient


def test_control_the_stock_client_waits_for_silence():
    """The control: jupyter_client's wait_for_ready (SteadyKernelClient's) never calls this kernel ready."""
    from course_utils.kernel_client import SteadyKernelClient
    assert _ready(SteadyKernelClient) == 100


@pytest.mark.slow
def test_each_notebook_runs_in_the_kernel_started_while_sanitizing(graded):
    """StartKernelEarly's kernel is the one each student's notebook runs in (course_staff/grading/early_kernel.py),
    sandboxed or not; the attacks and scores above are those of that kernel."""
    assert graded["log"].count(early_kernel.TAKEN) == 3, graded["log"][-3000:]


def test_a_failing_clean_up_still_removes_the_kernels_folder_copy(monkeypatch):
    """The sandbox's private copy of the kernel's folder goes with the kernel even when jupyter_client's
    own clean-up fails (here: raises), whoever asks for it: nbclient on a dead kernel, or early_kernel on a
    kernel started early that no one took (course_staff/grading/early_kernel.py). The error still surfaces."""
    async def fails(self, restart=False):
        raise OSError("the connection file could not be removed")
    monkeypatch.setattr(sandbox.GraderKernelManager, "_async_cleanup_resources", fails)
    km = sandbox.SandboxedKernelManager(kernel_name="python3")
    jail = km._jail = str(sandbox.make_jail(None))
    with pytest.raises(OSError, match="connection file"):
        early_kernel._discard(km)
    assert not Path(jail).exists() and km._jail == ""
