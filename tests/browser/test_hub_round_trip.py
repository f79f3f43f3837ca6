"""Lab 11 on a real JupyterHub, in a browser, across real Unix users (`make hub`'s set-up).

One test walks a lab's whole round trip as a class lives it, each step on the hub's own pages:

1. the instructor releases lab11 in Formgrader (due two hours ago; students 1 and 2 have a day's
   extension, student 3 none);
2. student 1 fetches it in the Assignments tab, fills in the reference solutions (saved through
   the server, as the editor saves), presses Validate and submits; student 2 submits the blank
   notebook; student 3 submits the solutions late;
3. student 2 tries to read student 1's submission and the instructor's course folder (source/,
   submitted/) from a terminal and through the file browser: every attempt is refused. The same
   probe after the exchange and the course folder are made world-readable reads them (the
   negative control: the probe can see a leak);
4. the instructor collects in Formgrader and autogrades on the shared PostgreSQL gradebook as a
   TA would (`make autograde JOBS=2`: the course's class grader, from the instructor's server
   environment), grades one written answer by hand in Formgrader, generates and releases feedback;
5. each student fetches the feedback and finds the score the gradebook holds and no hidden test.

The automatic scores are checked against what `make autograde` gives the same notebooks without the hub
(the solutions every check's points, the blank notebook 0: tests/test_mutants.py holds the plain grader to
the same table): the hub changes where notebooks travel, not their grades.
Screenshots of each step: artifacts/hub/. Needs root (it creates users); elsewhere it is skipped,
unless COURSE_REQUIRE_HUB=1 (set by .ci/run): then it fails.
"""

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from course_staff.testbed import harness                      # course_staff/testbed/harness.py: the reference solution, the release
from course_staff.testbed.lab_tables import table             # each check's points
from course_staff.hub import COURSE, exchange, server_environment
from tests import requirements
from tests.browser import jlab
from course_staff.course import REPO

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ARTIFACTS = REPO / "artifacts" / "hub"
ROOT = Path("/srv/rl-for-llms-hub-test")      # not `make hub`'s folder: both may exist at once
PREFIX = "rlt"
LAB = "lab11"
PY = sys.executable


# ---------------------------------------------------------------- the hub

def _skip_or_fail(reason):
    requirements.missing("hub", reason)


def _users_exist():
    return [u for u in _names() if _exists(u)]


def _names():
    return [f"{PREFIX}-instructor", *(f"{PREFIX}-student{i}" for i in (1, 2, 3))]


def _exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _stop():
    out = subprocess.run([PY, "-m", "course_staff.hub", "stop", "--root", str(ROOT)], cwd=REPO,
                         capture_output=True, text=True, timeout=180)
    print(out.stdout + out.stderr)


@pytest.fixture(scope="module")
def hub():
    """`python -m course_staff.hub start` (what `make hub` runs) in a folder of its own; stopped
    afterwards, whatever happened, and checked to leave no user, home or folder behind."""
    if os.geteuid() != 0 or not (shutil.which("useradd") or Path("/usr/sbin/useradd").exists()):
        _skip_or_fail("the hub round trip creates Unix users: it needs root and useradd")
    if not Path("/usr/bin/chromium").exists():
        _skip_or_fail("/usr/bin/chromium not found: install Debian's chromium (make browser)")
    inst = subprocess.run([PY, "-m", "course_staff.hub", "install"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert inst.returncode == 0, f"python -m course_staff.hub install failed:\n{inst.stdout}{inst.stderr}"
    if (ROOT / "hub" / "hub.json").exists() or _users_exist():    # a run killed before its clean-up
        _stop()
    t0 = time.monotonic()
    start = subprocess.run([PY, "-m", "course_staff.hub", "start", "--root", str(ROOT), "--prefix", PREFIX],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    print(start.stdout)
    try:
        assert start.returncode == 0, f"the hub did not start:\n{start.stdout}{start.stderr}"
        assert "password" in start.stdout and "http://127.0.0.1:" in start.stdout, start.stdout
        print(f"[hub] started in {time.monotonic() - t0:.0f} s")
        yield json.loads((ROOT / "hub" / "hub.json").read_text())
    finally:
        _stop()
        assert not _users_exist(), f"users left behind: {_users_exist()}"
        assert not ROOT.exists(), f"{ROOT} left behind"


def _as(state, user, script, check=True, timeout=300):
    """Run a bash ``script`` as ``user`` in their home, with their server's environment."""
    return _finish(_as_started(state, user, script), check, timeout)


def _as_started(state, user, script):
    """Start ``_as``'s script without waiting for it (``_finish`` waits): the Popen."""
    home = pwd.getpwnam(user).pw_dir
    env = {**server_environment(state, user), "HOME": home, "USER": user, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(["/usr/sbin/runuser", "-u", user, "--", "bash", "-c", script], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, check=True, timeout=300):
    """Wait for a script of ``_as_started``; its output (stdout, then stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(proc.args)}\nexited {proc.returncode}:\n{out}{err}")
    return out + err


# ---------------------------------------------------------------- the browser

def _shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


class Steps:
    """Numbered steps: each prints its time, saves a screenshot when done, names itself on failure."""

    def __init__(self):
        self.n = 0

    def __call__(self, page, name):
        self.n += 1
        return _Step(self, page, f"{self.n:02d}-{name}")


class _Step:
    def __init__(self, steps, page, name):
        self.page, self.name = page, name

    def __enter__(self):
        self.t0 = time.monotonic()
        print(f"[hub] {self.name} ...", flush=True)

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            try:
                where = _shot(self.page, f"FAILED-{self.name}")
            except Exception as shot_exc:   # noqa: BLE001 -- the page may be gone
                where = f"no screenshot ({shot_exc})"
            raise AssertionError(f"hub step failed: {self.name}\nscreenshot: {where}\n"
                                 f"{type(exc).__name__}: {exc}") from exc
        _shot(self.page, self.name)
        print(f"[hub] {self.name}: ok in {time.monotonic() - self.t0:.1f} s", flush=True)


def _log_in(browser, state, user):
    """Log ``user`` in on a page of their own: JupyterHub starts their server (``_lab`` waits for it)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{state['url']}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", state["users"][user])
    page.click("#login_submit")
    return page


def _lab(page):
    """``page`` once its user's server has spawned and JupyterLab has loaded in it."""
    page.wait_for_selector(".jp-LabShell", timeout=180_000)
    return page


def _to_lab(page, state, user):
    """Bring ``page`` to ``user``'s JupyterLab: loaded again unless the page shows it as it was loaded at
    login (a page opened at a path, /lab/tree/..., may hold that path's dialogs: "Cannot open ...")."""
    if page.url.rstrip("/") != f"{state['url']}/user/{user}/lab":
        print(f"[hub] {user}'s page shows {page.url}: JupyterLab loaded again")
        page.goto(f"{state['url']}/user/{user}/lab")
    page.locator(".jp-LabShell").wait_for()


def _nbgrader_menu(page, item):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).click()


def _api(page, state, user, path, method="GET", body=None):
    """The user's Jupyter server REST API, with the browser's own session (cookie and XSRF token)."""
    url = f"{state['url']}/user/{user}/api/{path}"
    xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
    response = page.request.fetch(url, method=method, headers={"X-XSRFToken": xsrf},
                                  data=json.dumps(body) if body is not None else None)
    return response.status, (response.json() if response.ok and response.body() else response.text())


def _assignments(page):
    """Open the Assignments tab (nbgrader's assignment list) and wait for it to load."""
    _nbgrader_menu(page, "Assignment List")
    page.locator("#released_assignments_list").wait_for()
    page.wait_for_function("() => !document.querySelector('#released_assignments_list_loading') || "
                           "document.querySelector('#released_assignments_list_loading').offsetParent === null",
                           polling=jlab.POLL_MS)


def _click_in_list(page, listing, label):
    item = page.locator(f"#{listing} .list_item", has_text=LAB)
    item.first.wait_for()
    item.first.get_by_role("button", name=label).click()


def _fetch(page):
    _assignments(page)
    _click_in_list(page, "released_assignments_list", "Fetch")
    page.locator("#fetched_assignments_list .list_item", has_text=LAB).first.wait_for()


def _submit(page):
    page.locator("#refresh_assignments_list").click()
    _click_in_list(page, "fetched_assignments_list", "Submit")
    page.locator("#submitted_assignments_list .list_item", has_text=LAB).first.wait_for()


def _save_notebook(page, state, user, nb):
    status, body = _api(page, state, user, f"contents/{LAB}/{LAB}.ipynb", "PUT",
                        {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
    assert status in (200, 201), f"saving {user}'s notebook: {status} {body}"


def _formgrader(page):
    _nbgrader_menu(page, "Formgrader")
    frame = page.frame_locator("iframe[src*='formgrader']")
    row = frame.locator("#main-table tr", has=frame.locator("td.name", has_text=LAB))
    row.wait_for()
    return frame, row


# ---------------------------------------------------------------- what student 2 tries

def _probe_script(state, inbound):
    """Bash run as student 2: for each thing of another user, READ or REFUSED."""
    s1, instructor = state["students"][0], state["instructor"]
    targets = {
        "list the exchange's submissions": f"ls {inbound}",
        "read student 1's submission": f"cat {inbound}/{s1}+{LAB}+*/{LAB}.ipynb",
        "read student 1's own copy": f"cat /home/{s1}/{LAB}/{LAB}.ipynb",
        "list the course folder": f"ls /home/{instructor}",
        "read the course's source/": f"cat /home/{instructor}/source/{LAB}/{LAB}.ipynb",
        "read the collected submission": f"cat /home/{instructor}/submitted/{s1}/{LAB}/{LAB}.ipynb",
        "import course_staff": "python -c 'import course_staff'",
    }
    lines = [f'if {cmd} >/dev/null 2>&1; then echo "READ: {what}"; else echo "REFUSED: {what}"; fi'
             for what, cmd in targets.items()]
    return "; ".join(lines), len(targets)


def _verdicts(text):
    """{what student 2 tried: "READ" or "REFUSED"} from the probe's output."""
    return {what: verdict for verdict, what in re.findall(r"^(READ|REFUSED): (.+)$", text, flags=re.M)}


# ---------------------------------------------------------------- scores

def _hub_scores(state, students):
    """{student: {grade_id: counted score}} and {student: late penalty} from the hub's gradebook."""
    from nbgrader.api import Gradebook

    from course_staff.grading.manual_scores import counted_score
    scores, penalties = {}, {}
    with Gradebook(state["db_url"]) as gb:
        for s in students:
            sub = gb.find_submission(LAB, s)
            scores[s] = {g.name: counted_score(g) for nb in sub.notebooks for g in nb.grades if g.max_score > 0}
            penalties[s] = sub.late_submission_penalty or 0.0
    return scores, penalties


def _notebook_id(state, student):
    """The gradebook's id of ``student``'s lab11 notebook (Formgrader's grading page is by id)."""
    from nbgrader.api import Gradebook

    with Gradebook(state["db_url"]) as gb:
        return gb.find_submission_notebook(LAB, LAB, student).id


def _hidden_test_lines(seen):
    """The lines of the source's hidden tests that appear nowhere in ``seen`` (a notebook students
    may see: the release with the solutions filled in; a hint may quote a line), over 12 characters."""
    visible = "\n".join(cell.source for cell in seen.cells)
    lines, inside = [], False
    for cell in nbformat.read(str(REPO / "source" / LAB / f"{LAB}.ipynb"), as_version=4).cells:
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) > 12 and line.strip() not in visible:
                lines.append(line.strip())
    assert lines, "no hidden tests found in the source notebook"
    return lines


def _written_answers(nb):
    """{grade_id: points} of the written answers (graded markdown cells) of a notebook."""
    return {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader["points"]) for c in nb.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")}


def _modal_ok(frame):
    """Close Formgrader's result dialog (it opens when a release, collect or feedback is done)."""
    button = frame.locator(".modal-dialog .modal-footer button", has_text=re.compile("OK|Close", re.I)).first
    button.wait_for(timeout=300_000)
    button.click()


# ---------------------------------------------------------------- the round trip

def test_lab11_round_trip_on_jupyterhub(hub, browser):
    state, step = hub, Steps()
    t_start = time.monotonic()
    instructor, (s1, s2, s3) = state["instructor"], state["students"]
    inbound = f"{state['exchange']}/{COURSE}/inbound"
    # everyone logs in first, at once: the four servers spawn side by side while the test prepares
    logged_in = {user: _log_in(browser, state, user) for user in (instructor, s1, s2, s3)}
    solved, blank = harness.solved_submission(LAB), harness.blank_submission(LAB)
    written = _written_answers(blank)
    written_id, written_points = next(iter(written.items()))

    # -- the exchange as `make hub` laid it out
    laid = exchange.modes(state["exchange"])
    expected = {rel: ("root" if owner == "root" else instructor, mode) for rel, (owner, mode) in exchange.LAYOUT.items()}
    assert laid == expected, f"the exchange's folders (owner, mode): {laid}, expected {expected}"

    # -- 1. the due date and the extensions (the gradebook, as the instructor), then the release
    due = datetime.now(timezone.utc) - timedelta(hours=2)
    _as(state, instructor, f"""python - <<'EOF'
from datetime import timedelta
from nbgrader.api import Gradebook
import os
with Gradebook(os.environ["NBGRADER_DB_URL"]) as gb:
    gb.update_or_create_assignment("{LAB}", duedate="{due.strftime('%Y-%m-%d %H:%M:%S')}")
    for s in ("{s1}", "{s2}", "{s3}"):
        gb.update_or_create_student(s)
    for s in ("{s1}", "{s2}"):       # nbgrader's per-student extension, on the submission's record
        gb.update_or_create_submission("{LAB}", s, extension=timedelta(days=1))
EOF""")
    teacher = _lab(logged_in[instructor])
    with step(teacher, "instructor-releases-lab11-in-formgrader"):
        frame, row = _formgrader(teacher)
        row.locator("td.release a").click()
        _modal_ok(frame)
        row.locator("td.status", has_text="released").wait_for()
    assert (Path(inbound).parent / "outbound" / LAB / f"{LAB}.ipynb").exists()

    # -- 2. the students
    pages = {}
    for student, submission, label in ((s1, solved, "solutions"), (s2, None, "blank"), (s3, solved, "late")):
        page = pages[student] = _lab(logged_in[student])
        with step(page, f"{student}-fetches-lab11-in-assignments"):
            _fetch(page)
        if submission is not None:
            _save_notebook(page, state, student, submission)
        if student == s1:
            with step(page, f"{student}-validates"):
                page.goto(f"{state['url']}/user/{student}/lab/tree/{LAB}/{LAB}.ipynb")
                page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
                page.locator(".jp-Toolbar-item", has_text="Validate").first.click()
                dialog = page.locator(".jp-Dialog")
                dialog.wait_for(timeout=240_000)
                dialog.get_by_text(re.compile("Success|passes", re.I)).first.wait_for(timeout=240_000)
            validated = page.locator(".jp-Dialog").inner_text()
            assert "Success" in validated, validated
            page.locator(".jp-Dialog button").last.click()
        with step(page, f"{student}-submits-{label}"):
            _assignments(page)
            _submit(page)
    # students see Assignments and Validate, never Formgrader
    page = pages[s2]
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    items = [t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.keyboard.press("Escape")
    assert items == ["Assignment List"], f"a student's Nbgrader menu: {items}"
    status, _ = _api(page, state, s2, "../formgrader/manage_assignments")
    print(f"[hub] a student's Nbgrader menu: {items}; the formgrader's URL: HTTP {status}")
    assert status in (403, 404), f"a student reached the formgrader: HTTP {status}"

    # -- 3. collect, autograde on the shared gradebook
    with step(teacher, "instructor-collects-in-formgrader"):
        frame, row = _formgrader(teacher)
        row.locator("td.collect a").click()
        _modal_ok(frame)
    for s in (s1, s2, s3):
        assert (Path(f"/home/{instructor}/submitted/{s}/{LAB}/{LAB}.ipynb")).exists(), s
    t0 = time.monotonic()
    # the TA's autograde runs while student 2 probes from a terminal and the file browser (both only
    # read); it has ended before the negative control opens the course folder to everyone
    grading = _as_started(state, instructor, f"python -m course_staff.grading.class_grading autograde {LAB} --jobs 2")
    # -- 4. student 2 against student 1 and the course: terminal, file browser, then the control
    probe, n_targets = _probe_script(state, inbound)
    with step(page, f"{s2}-terminal-probes-others-files"):
        _to_lab(page, state, s2)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^New$")).hover()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Terminal$")).click()
        page.locator(".jp-Terminal .xterm").first.wait_for()
        t_prompt = time.monotonic()
        try:     # the shell's prompt: the terminal is connected. A renderer that draws on a canvas (WebGL)
            # has no text rows to read it from, but the prompt names the tab ("user@host: ~", its title)
            page.wait_for_function(
                "user => /\\$/.test((document.querySelector('.jp-Terminal .xterm-rows') || {textContent: ''})"
                ".textContent) || Array.from(document.querySelectorAll('.lm-TabBar-tabLabel'))"
                ".some(e => e.textContent.startsWith(user + '@'))", arg=s2, timeout=15_000,
                polling=jlab.POLL_MS)
        except Exception:   # noqa: BLE001 -- neither shows: wait a little
            page.wait_for_timeout(3000)
        print(f"[hub] the terminal's prompt after {time.monotonic() - t_prompt:.1f} s", flush=True)
        page.locator(".jp-Terminal .xterm").first.click()
        # the probe, saved in student 2's home through their own server, then run from the terminal (a
        # short line to type: a keystroke each, the whole probe took half a minute)
        status, _ = _api(page, state, s2, "contents/probe.sh", "PUT",
                         {"type": "file", "format": "text", "content": probe + "\n"})
        assert status in (200, 201), f"saving student 2's probe.sh: HTTP {status}"
        page.keyboard.type(f"bash probe.sh > ~/probe.txt; ln -s {inbound} ~/peek-inbound; "
                           f"ln -s /home/{instructor} ~/peek-course; cat ~/probe.txt\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code, body = _api(page, state, s2, "contents/probe.txt?content=1&type=file&format=text")
            if code == 200 and len(_verdicts(body["content"])) == n_targets:
                break
            time.sleep(0.5)
        page.wait_for_timeout(500)
    from_terminal = _verdicts(body["content"])
    print("[hub] student 2's terminal:", json.dumps(from_terminal, indent=1))
    assert len(from_terminal) == n_targets and set(from_terminal.values()) == {"REFUSED"}, \
        f"student 2 read another's files:\n{body['content']}"
    with step(page, f"{s2}-file-browser-refused"):
        browse = {}
        for link in ("peek-inbound", "peek-course"):
            code, answer = _api(page, state, s2, f"contents/{link}?content=1")
            browse[link] = code
        page.goto(f"{state['url']}/user/{s2}/lab/tree/peek-course")
        page.locator(".jp-LabShell").wait_for()
        page.wait_for_timeout(1500)
    print("[hub] student 2's file browser (HTTP status per folder):", browse)
    assert all(code >= 400 for code in browse.values()), f"the file browser opened another's folder: {browse}"
    graded_log = _finish(grading, timeout=600)
    print(f"[hub] autograde JOBS=2 on PostgreSQL, {time.monotonic() - t0:.0f} s:\n{graded_log[-1500:]}")
    assert "every notebook in the sandbox" in graded_log, "the instructor's grading must run in the sandbox"

    # the negative control: the same probe, the exchange and the course folder world-readable
    trees = (Path(state["exchange"]), Path(f"/home/{instructor}"))
    saved = {p: p.lstat().st_mode & 0o7777 for t in trees for p in [t, *t.rglob("*")] if not p.is_symlink()}
    subprocess.run(["chmod", "-R", "a+rX", *map(str, trees)], check=True)
    try:
        control = _verdicts(_as(state, s2, probe, check=False))
        code_control, _ = _api(page, state, s2, "contents/peek-inbound?content=1")
    finally:
        for path, mode in saved.items():
            os.chmod(path, mode)
    print("[hub] the same probe, world-readable:", json.dumps(control, indent=1), "file browser:", code_control)
    leaked = {what for what, verdict in control.items() if verdict == "READ"}
    assert {"list the exchange's submissions", "read student 1's submission", "list the course folder",
            "read the course's source/", "read the collected submission"} <= leaked, \
        f"the negative control read nothing: the probe cannot see a leak ({control})"
    assert code_control == 200, f"the file browser, world-readable exchange: HTTP {code_control}"
    assert _verdicts(_as(state, s2, probe, check=False)).get("read student 1's submission") == "REFUSED"

    # -- 5. a written answer graded by hand, feedback
    with step(teacher, f"instructor-grades-{written_id}-of-{s1}"):
        teacher.goto(f"{state['url']}/user/{instructor}/formgrader/gradebook/{LAB}/{LAB}")
        teacher.locator("#main-table tr").first.wait_for()
        teacher.goto(f"{state['url']}/user/{instructor}/formgrader/submissions/{_notebook_id(state, s1)}")
        teacher.wait_for_load_state("networkidle")      # the page's grade models are loaded
        score = teacher.locator(f"input.score#{written_id}")
        score.scroll_into_view_if_needed()
        for _ in range(3):                               # typed, then saved on change, as a TA does
            score.click()
            score.fill(str(written_points / 2))
            score.dispatch_event("change")
            deadline = time.monotonic() + 15
            while _hub_scores(state, (s1,))[0][s1][written_id] != written_points / 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            if _hub_scores(state, (s1,))[0][s1][written_id] == written_points / 2:
                break
        teacher.wait_for_timeout(500)
    hub_scores, penalties = _hub_scores(state, (s1, s2, s3))
    assert hub_scores[s1][written_id] == written_points / 2, hub_scores[s1]
    with step(teacher, "instructor-generates-and-releases-feedback"):
        teacher.goto(f"{state['url']}/user/{instructor}/lab")
        teacher.locator(".jp-LabShell").wait_for()
        frame, row = _formgrader(teacher)
        for column in ("generate-feedback", "release-feedback"):
            row.locator(f"td.{column} a").click()
            _modal_ok(frame)

    # -- the automatic scores, against what `make autograde` gives these notebooks without the hub: the
    # reference solutions every check's points, the blank notebook 0 everywhere (tests/test_mutants.py's
    # test_solution_gets_full_marks and test_blank_gets_zero hold the plain grader to the same table)
    marks = table(LAB)
    solution = {**marks.auto_marks(), **{q: None for q in marks.written_marks()}}
    blank_marks = {g: 0.0 for g in marks.full_marks()}
    assert {**hub_scores[s1], written_id: None} == solution, f"{s1}: the hub's gradebook {hub_scores[s1]}"
    assert hub_scores[s2] == blank_marks, f"{s2}: the hub's gradebook {hub_scores[s2]}"
    assert hub_scores[s3] == solution, f"{s3}: the hub's gradebook {hub_scores[s3]}"
    raw3 = sum(v or 0 for v in hub_scores[s3].values())
    assert penalties[s1] == penalties[s2] == 0, penalties
    assert raw3 > 0 and abs(penalties[s3] - 0.1 * raw3) < 1e-6, (raw3, penalties[s3])

    # -- 6. each student fetches the feedback: the gradebook's score, no hidden test
    hidden = _hidden_test_lines(solved)
    for s, page in pages.items():
        with step(page, f"{s}-fetches-feedback"):
            _to_lab(page, state, s)
            _assignments(page)
            page.locator("#refresh_assignments_list").click()
            page.locator("#submitted_assignments_list .list_item", has_text=LAB).first.get_by_role(
                "button", name=re.compile("Fetch Feedback", re.I)).click(timeout=120_000)
            deadline = time.monotonic() + 60
            html_path = None
            while time.monotonic() < deadline and html_path is None:
                code, listing = _api(page, state, s, f"contents/{LAB}/feedback?content=1")
                if code == 200 and listing["content"]:
                    html_path = f"{LAB}/feedback/{listing['content'][0]['name']}/{LAB}.html"
                time.sleep(0.5)
            assert html_path, f"{s}: no feedback folder after Fetch Feedback"
            page.goto(f"{state['url']}/user/{s}/files/{html_path}")
            page.wait_for_timeout(1000)
        code, doc = _api(page, state, s, f"contents/{html_path}?content=1&type=file&format=text")
        html = doc["content"]
        expected = sum(v or 0 for v in hub_scores[s].values()) - penalties[s]
        shown = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", html)
        print(f"[hub] {s}'s feedback: {shown and shown.group(0)}; gradebook: {hub_scores[s]}, "
              f"late penalty {penalties[s]}")
        assert shown and abs(float(shown.group(1)) - expected) < 0.01, \
            f"{s}: feedback shows {shown and shown.group(0)}, the gradebook {expected}"
        assert not [line for line in hidden if line in html], f"{s}'s feedback quotes a hidden test"
        assert ("Late submission penalty" in html) == (s == s3), f"{s}: the late penalty in the feedback"
    print(f"[hub] round trip (after the hub started): {time.monotonic() - t_start:.0f} s")
