"""Tampering from inside the kernel, against the grader's runtime defences (course_staff/grading/nbgrader_plugins.py).

Lab 11 is graded by nbgrader on a copy of the course. The attacks dodge the static scan (``tampering``:
no ``sys.modules``, ``_getframe`` or ``f_locals`` written out, only ``getattr`` on names built from pieces), so
that each runtime defence is tested on its own:

    swapper   puts a fake course_utils.checks into sys.modules (every check passes), functions are stubs
              -> the module guard (MODULE_GUARD) sees the module replaced: held at 0 for a TA
    walker    the honest solution, whose kl_objective walks up the frames to the hidden test that calls it
              and calls the hidden reference it finds there
              -> the audit hook (AUDIT_HOOK) refuses the frame and reports it: held at 0 for a TA
    reader    the honest solution plus a last cell that prints a hidden test's value by its name
              -> hidden blocks run inside a function: the name is not there

Negative control, ``open``: the same students graded with these defences switched off in the course's
config (guard_hooks, audit_frames, hidden_in_function): each attack works there. Graded only with the
defences on (``guarded``): an honest student (full marks, not flagged), the reviewer's answer look-alikes
(a float subclass that reads the hidden value when converted) and stubs of the split tasks' parts.
"""

import json
import textwrap

import pytest

from course_staff.testbed import harness as h
from course_staff.grading.nbgrader_plugins import hidden_in_function, tampering

LAB = "lab11"

# a fake checks module in sys.modules: everything passes (the reviewer's "patcher", without the words the scan knows)
SWAP = textwrap.dedent(f"""
    import contextlib as _cl, types as _types, importlib as _il, numpy as _np
    _fake = _types.ModuleType("course_utils.checks")
    _fake.assert_close = _fake.assert_true = _fake.assert_equal_list = lambda *a, **k: None
    _fake.no_warnings, _fake.needs = _cl.nullcontext, lambda *a, **k: _cl.nullcontext()
    _fake.to_array = lambda v, name="": _np.zeros((15, 15))
    _fake.FLOAT64 = _fake.LOG_Z = _fake.SLOPE = _fake.TRAINED = {{}}
    getattr(_il.import_module("s" + "ys"), "mod" + "ules").update({{"course_utils.checks": _fake}})
    """)
STUBS = {"response_logprobs_solution": "return None", "sample_with_temperature_solution": "return None",
         "sequence_logprob_solution": "return None", "kl_estimators_solution": "return None, None, None",
         "tilted_optimum_solution": "return None, None", "kl_objective_solution": "return 0.0",
         "token_level_optimum_solution": "return 0, 0, 0, 0"}

# a look-up of a name in the frames above the caller (the hidden test's locals, then its globals)
PEEK = textwrap.dedent("""
    import importlib as _il
    def _peek(name):
        f = getattr(_il.import_module("s" + "ys"), "_get" + "frame")(2)
        while f is not None:
            for scope in (getattr(f, "f_" + "locals"), getattr(f, "f_" + "globals")):
                if name in scope:
                    return scope[name]
            f = getattr(f, "f_" + "back")
    """)
WALK = """    try:
        _found = _peek("_ref_J")
        if _found is not None:
            print("WALKER FOUND _ref_J:", _found(probs, ref_probs, rewards, beta))
    except RuntimeError as _e:
        print("WALKER REFUSED:", _e)
    support = probs > 0"""

READ = textwrap.dedent("""
    try:
        print("HIDDEN VALUE _limit =", _limit)
    except NameError:
        print("not found: _limit")
    try:
        print("HIDDEN VALUE _ref_J =", _ref_J)
    except NameError:
        print("not found: _ref_J")
    """)

LAZY = textwrap.dedent("""
    class _Lazy(float):
        def __float__(self):
            try:
                return float(_limit)
            except NameError:
                return 0.0
    """)


def _replace_stub(nb, replacements):
    """The release notebook with the stub of each named solution cell replaced by a body."""
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in replacements:
            cut = cell.source.index("    # YOUR CODE HERE")
            cell.source = cell.source[:cut] + textwrap.indent(replacements[gid], "    ") + "\n"
    return nb


def _set(nb, gid, source):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == gid:
            cell.source = source
    return nb


def students():
    swapper = _replace_stub(h.blank_submission(LAB), STUBS)
    swapper = _set(swapper, "response_logprobs_solution",
                   SWAP + next(c.source for c in swapper.cells
                               if c.metadata.get("nbgrader", {}).get("grade_id") == "response_logprobs_solution"))
    walker = h.solved_submission(LAB, edits={"kl_objective_solution": [("    support = probs > 0", WALK)]})
    walker = _set(walker, "kl_objective_solution",
                  PEEK + next(c.source for c in walker.cells
                              if c.metadata.get("nbgrader", {}).get("grade_id") == "kl_objective_solution"))
    reader = h.solved_submission(LAB)
    reader.cells.append(h.nbformat.v4.new_code_cell(READ))
    lazy = h.solved_submission(LAB)
    lazy = _set(lazy, "concept_entropy_limit", LAZY + "def entropy_limit():\n    return _Lazy(0.0)\n")
    lazy = _set(lazy, "concept_kl_limit", "def kl_limit():\n    return _Lazy(0.0)\n")
    stubs = _replace_stub(h.blank_submission(LAB), {"tilted_optimum_solution": "return None, None",
                                                     "token_level_optimum_solution": "return 0, 0, 0, 0"})
    huge = _replace_stub(h.blank_submission(LAB), {"token_level_optimum_solution":
                         "return first.copy(), np.zeros_like(second), np.full(len(first), 1e300), 1e300"})
    return {"swapper": swapper, "walker": walker, "reader": reader, "lazy": lazy, "stubs": stubs, "huge": huge,
            "zed": h.solved_submission(LAB)}


def _outputs(course, student):
    nb = json.loads((course / "autograded" / student / LAB / f"{LAB}.ipynb").read_text())
    return "\n".join(json.dumps(c.get("outputs", [])) for c in nb["cells"])


@pytest.fixture(scope="module", params=["guarded", "open"])
def graded(request, tmp_path_factory):
    mode = request.param
    course = h.course_copy(tmp_path_factory.mktemp(f"kernel-{mode}"), labs=[LAB])
    subs = students()
    if mode == "open":
        with (course / "nbgrader_config.py").open("a") as config:
            config.write("\nc.SurviveKernelDeath.guard_hooks = False\nc.SurviveKernelDeath.audit_frames = False\n"
                         "c.SurviveKernelDeath.hidden_in_function = False\n")
        subs = {s: subs[s] for s in ("swapper", "walker", "reader")}
    grades = h.autograde(course, LAB, subs, timeout=1500)
    assert not grades.ungradable, grades.ungradable
    return dict(mode=mode, course=course, grades=grades, log=grades.log,
                code={s: sum(v or 0 for k, v in g.items() if k.startswith("test_")) for s, g in grades.items()})


def test_the_attacks_dodge_the_static_scan():
    """So that what follows tests the runtime defences, not the scan."""
    for name, nb in students().items():
        if name in ("swapper", "walker", "reader"):
            assert tampering(nb.cells) == [], name


@pytest.mark.slow
def test_a_replaced_checks_module_is_held_for_review(graded):
    flagged = graded["grades"].flagged.get("swapper", [])
    if graded["mode"] == "open":
        assert graded["code"]["swapper"] > 0 and not any(g.startswith("test_") for g in flagged), \
            "negative control: without the module guard the fake checks should pay"
        return
    assert graded["code"]["swapper"] == 0 and any(g.startswith("test_") for g in flagged)
    assert "TAMPERING?" in graded["log"] and "course_utils.checks was replaced" in graded["log"]


@pytest.mark.slow
def test_a_frame_walk_to_the_hidden_test_is_refused_and_held_for_review(graded):
    out = _outputs(graded["course"], "walker")
    if graded["mode"] == "open":
        assert "WALKER FOUND _ref_J" in out, "negative control: without the audit hook the walk should succeed"
        return
    assert "WALKER FOUND" not in out and "WALKER REFUSED" in out
    assert graded["code"]["walker"] == 0 and "asked for frames" in graded["log"]


@pytest.mark.slow
def test_no_hidden_name_is_left_for_a_later_cell(graded):
    out = _outputs(graded["course"], "reader")
    if graded["mode"] == "open":
        assert "HIDDEN VALUE _limit" in out, "negative control: hidden blocks at top level leave their names"
        return
    assert "HIDDEN VALUE" not in out and "not found: _limit" in out
    assert graded["grades"]["reader"] == graded["grades"]["zed"]
    assert not any(g.startswith("test_") for g in graded["grades"].flagged.get("reader", []))


@pytest.mark.slow
@pytest.mark.parametrize("graded", ["guarded"], indirect=True)    # the open run grades only the three above
def test_the_honest_student_gets_full_marks_unflagged(graded):
    maxes = h.max_scores(graded["course"], LAB)
    assert {g: s for g, s in graded["grades"]["zed"].items() if g.startswith("test_")} == \
        {g: s for g, s in maxes.items() if g.startswith("test_")}
    assert not any(g.startswith("test_") for g in graded["grades"].flagged.get("zed", []))   # written answers wait


@pytest.mark.slow
@pytest.mark.parametrize("graded", ["guarded"], indirect=True)    # the open run grades only the three above
def test_look_alike_answers_and_stubs_get_nothing(graded):
    """A float subclass that reads the hidden value when converted; split parts that pay for stubs; a 'given
    your own V' of 1e300 (the reviewer's attacks of this round, 1 point each before)."""
    g = graded["grades"]
    assert g["lazy"]["test_concept_entropy_limit"] == 0 and g["lazy"]["test_concept_kl_limit"] == 0
    assert g["stubs"]["test_tilted_optimum_inputs"] == 0 and g["stubs"]["test_token_level_optimum_inputs"] == 0
    assert g["huge"]["test_token_level_optimum_policy"] == 0 and g["huge"]["test_token_level_optimum_inputs"] == 0


def test_hidden_blocks_move_into_a_function_that_leaves_nothing():
    """Every hidden block of the labs moves (it compiles), and a moved block's names are gone after it runs;
    control: the block as written leaves them."""
    for lab in h.LABS:
        for cell in h._read("source", lab).cells:
            if "### BEGIN HIDDEN TESTS" in cell.source:
                assert hidden_in_function(cell.source) != cell.source, (lab, cell.metadata.nbgrader.grade_id)
    source = "x = 1\n### BEGIN HIDDEN TESTS\n_secret = x + 1\nassert _secret == 2\n### END HIDDEN TESTS\n"
    moved, kept = {}, {}
    exec(hidden_in_function(source), moved)
    exec(source, kept)
    assert "_secret" not in moved and "_course_hidden_tests" not in moved and kept["_secret"] == 2


def test_the_scan_names_frames_sys_modules_and_the_graders_names():
    """The static scan's second line; control: an honest cell that collects garbage and reads a signature."""
    import nbformat

    def reasons(code):
        cell = nbformat.v4.new_code_cell(code)
        cell.metadata["nbgrader"] = {"grade_id": "x", "solution": True, "locked": False}
        return tampering([cell])

    for code in ("import sys\nsys.modules['course_utils.checks'] = None", "import sys as s\nf = s._getframe(1)",
                 "from inspect import currentframe", "import inspect\ninspect.stack()", "x = f.f_back.f_locals",
                 "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame", "import gc\ngc.get_referrers(x)",
                 "_course_module_prints = lambda first: {}"):
        assert reasons(code), code
    assert reasons("import gc, inspect\ngc.collect()\ninspect.signature(len)\nimport sys\nsys.stdout.flush()") == []


def test_to_array_refuses_look_alikes_and_converts_genuine_answers():
    """A tensor look-alike (its own numpy()) and a float subclass never run inside a check; genuine tensors,
    parameters, arrays, numpy and Python numbers and lists of them convert. Control: the look-alike's own
    numpy() would have been called (it records the call) had it been accepted."""
    import numpy as np
    import torch

    from course_utils.checks import AnswerError, to_array

    calls = []

    class LooksLikeATensor:
        dtype = torch.float64
        def detach(self): return self
        def cpu(self): return self
        def double(self): return self
        def numpy(self):
            calls.append("numpy")
            return np.zeros(())

    class Lazy(float):
        def __float__(self):
            calls.append("float")
            return 0.0

    for bad in (LooksLikeATensor(), Lazy(1.0), [Lazy(1.0)], torch.tensor([1.0]).as_subclass(type("T", (torch.Tensor,), {}))):
        with pytest.raises(AnswerError):
            to_array(bad)
    assert calls == []
    for good, value in ((torch.tensor([1.0, 2.0]), [1, 2]), (torch.nn.Parameter(torch.ones(2)), [1, 1]),
                        (np.arange(2), [0, 1]), (np.float32(0.5), 0.5), (3, 3), (True, 1), ([1.0, np.int64(2)], [1, 2]),
                        ((torch.tensor(1.0), 2.0), [1, 2])):
        assert to_array(good).tolist() == value


def test_a_traceback_of_its_own_line_that_contains_another_cells_hidden_line_is_no_quote():
    """A hidden line may contain another cell's hidden line (``_x = f(a)[0]`` and ``_x = f(a)``): a cell's own
    traceback showing its line quotes nothing. Control: the same text in a plain output does count."""
    import nbformat

    from course_staff.grading.nbgrader_plugins import quoted_hidden_tests

    def cell(hidden, outputs=()):
        c = nbformat.v4.new_code_cell(f"x = 1\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n",
                                      outputs=list(outputs))
        c.metadata["nbgrader"] = {"grade_id": hidden[:5], "grade": True, "locked": True, "solution": False}
        return c

    longer = "_other = gae_per_token(_r, _v, _m)[0]"
    error = nbformat.v4.new_output("error", ename="AnswerError", evalue="x", traceback=[f"---> 3 {longer}"])
    assert quoted_hidden_tests([cell("_other = gae_per_token(_r, _v, _m)"), cell(longer, [error])]) == []
    printed = nbformat.v4.new_output("stream", text=f"{longer}\n")
    assert quoted_hidden_tests([cell("_other = gae_per_token(_r, _v, _m)"), cell("_y = 2 + 2 + 2 + 2 + 2", [printed])])
