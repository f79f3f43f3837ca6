"""The staff companion "Beyond PPO": DPO's and GRPO's pieces, the cache of results, its views, and the
notebook run top to bottom (slow)."""

import json
import math
import time
import types

import pytest
import torch

from course_staff.beyond import methods as B
from course_staff.beyond import results as R
from course_staff.fingerprint import code_digest
from course_staff.course import REPO
from benchmarks.provenance import import_graph, module_files

NOTEBOOK = REPO / "notebooks" / "beyond_ppo.ipynb"
CELL_TIMEOUT_S = 300            # a hung cell fails; how long Run All takes is a benchmark's figure, not a test's


# ----------------------------------------------------------------------------- Lab 13's view of the world
# DPO and GRPO are Lab 13's reference functions (their checks are the lab's); what Beyond PPO adds is tested here
def test_lab13_pairs_follow_the_ranking_and_drop_identical_pairs():
    ids = torch.tensor([[12, 7, 10, 5, 11, 1, 2, 13, 14],       # "12"
                        [12, 7, 10, 5, 11, 13, 14, 14, 14],     # blank
                        [12, 7, 10, 5, 11, 1, 2, 13, 14]])      # "12" again
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 0]])
    data = [{"prompt": "7+5=", "out": {"ids": ids, "prompt_len": 5, "mask": mask},
             "gold": torch.tensor([1.0, -1.0, 1.0]), "ranking": [0, 1, 2]}]
    world = types.SimpleNamespace(sft=None, rm=None, rm_offset=0.0, train_data=data, held_out=data)
    pairs = B.as_lab13(world).train_pairs
    # ranking_to_pairs gives (0, 1), (0, 2), (1, 2); (0, 2) holds one response twice
    assert pairs["chosen"]["ids"].tolist() == [ids[0].tolist(), ids[1].tolist()]
    assert pairs["rejected"]["ids"].tolist() == [ids[1].tolist(), ids[2].tolist()]
    assert pairs["chosen"]["mask"].tolist() == [mask[0].tolist(), mask[1].tolist()]
    assert pairs["rows"].tolist() == [[0, 1], [1, 2]]


def test_k3_in_the_loss_follows_the_gradient_of_the_reverse_kl():
    """The notebook's claim: on-policy, the gradient of E[k3] taken through log pi only is the gradient
    of KL(pi_ref || pi), not of KL(pi || pi_ref)."""
    logits = torch.tensor([1.0, 0.0, -1.0, 0.5], requires_grad=True)
    ref = torch.log_softmax(torch.tensor([0.0, 1.0, 0.0, -2.0]), 0)
    logp = torch.log_softmax(logits, 0)
    surrogate = (logp.exp().detach() * B.k3(logp, ref)).sum()             # E_{y ~ pi}[k3(y)], pi not differentiated
    g_k3, = torch.autograd.grad(surrogate, logits, retain_graph=True)
    g_fwd, = torch.autograd.grad((ref.exp() * (ref - logp)).sum(), logits, retain_graph=True)   # KL(ref || pi)
    g_rev, = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), logits)                    # KL(pi || ref)
    assert torch.allclose(g_k3, g_fwd, atol=1e-6)
    assert not torch.allclose(g_k3, g_rev, atol=1e-2)


# ----------------------------------------------------------------------------- the cache
def test_code_digest_ignores_docstrings_and_comments_not_code():
    src = 'def f(x):\n    """doc"""\n    return x + 1  # one\n'
    assert code_digest(src) == code_digest('def f(x):\n    """another doc"""\n\n    return x + 1\n')
    assert code_digest(src) != code_digest('def f(x):\n    """doc"""\n    return x + 2\n')


# modules the experiment imports whose code moves no cached number: a progress bar, the course's paths and list
# of labs, and the loader of the labs' cells (the cells themselves are in the fingerprint: R.LAB_NAMES)
NO_NUMBERS = {"course_utils/runtime.py", "course_staff/course.py", "course_staff/solutions.py"}
# imports of a function the experiment never calls: course_utils.lab13_world's load_world reads Lab 12's PPO curves
# (course_utils.views.lab12) for the saved world; Beyond PPO makes its worlds with as_lab13, which has no curves
NOT_CALLED = {("course_utils.lab13_world", "course_utils.views.lab12")}


def test_the_fingerprint_covers_every_module_the_experiment_runs():
    graph, files = import_graph(), module_files()
    todo, used = ["course_staff.beyond.methods", "course_staff.beyond.experiment"], set()
    while todo:                                   # every module they import, directly or through another
        module = todo.pop()
        if module not in used:
            used.add(module)
            todo += [m for m in graph.get(module, ()) if (module, m) not in NOT_CALLED]
    used = {files[m] for m in used if not files[m].endswith("__init__.py")}
    missing = used - set(R.INPUT_FILES) - NO_NUMBERS
    assert not missing, f"the cache's fingerprint misses code its numbers depend on: {sorted(missing)}"
    assert {"course_utils/world.py", "course_utils/tinylm.py", "course_staff/exact.py"} <= used  # the walk follows


@pytest.fixture(scope="module")
def cached():
    """The cache as the notebook reads it. The tests below check what holds of any build of this code (every
    method and optimum at every beta, J* - J = beta KL, the views draw it), so a committed cache that is
    merely stale (the code changed since: `make test` names it in a warning) is read as it is; one made for
    other betas or methods is rebuilt (course_staff.beyond.results; the cache records its CPU seconds)."""
    res = json.loads(R.CACHE_PATH.read_text()) if R.CACHE_PATH.exists() else None
    if res is None or res.get("betas") != list(R.BETAS) or res.get("methods") != list(R.METHODS):
        res = R.results()
    return res


def test_cache_holds_every_method_and_both_optima_at_every_beta(cached):
    assert cached["betas"] == list(R.BETAS) and cached["methods"] == list(R.METHODS)
    for beta in R.BETAS:
        run = cached["runs"][repr(beta)]
        for name in ("optimum",) + R.METHODS:
            assert name in run, f"beta {beta}: no {name}"
        for o in ("rm", "gold"):
            assert abs(run["optimum"][o][o]["kl_to_opt"]) < 1e-9, "an optimum is at distance 0 from itself"
            for m in R.METHODS:
                f = run[m][o]
                assert f["kl_to_opt"] >= 0 and math.isclose(f["gap"], beta * f["kl_to_opt"], rel_tol=1e-4, abs_tol=1e-7), \
                    f"{m} at beta {beta}: J* - J must equal beta KL(pi || pi*)"
        assert len(run["DPO"]["epochs"]) == B.lab("lab13")["DPOConfig"]().epochs


def test_views_draw_the_cache(cached):
    from course_staff.beyond import views as V
    for fig in (V.plot_summary(cached), V.plot_dpo_epochs(cached), V.plot_budget(cached, 0.1)):
        assert fig._repr_png_()[:4] == b"\x89PNG"
    view = V.MethodsSlider(cached)
    frames = {beta: view.update(beta) for beta in cached["betas"]}
    assert view.caption().startswith(f"beta = {cached['betas'][-1]:g}")
    assert all(png[:4] == b"\x89PNG" for png in frames.values())
    assert len(set(frames.values())) == len(frames), "each beta draws its own frame"


# ----------------------------------------------------------------------------- the notebook
def test_notebook_is_staff_only_and_saved_without_outputs():
    import nbformat
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = nb.cells[0].source
    assert "staff" in first.lower() and "student edition" in first.lower()
    assert nb.metadata.get("course", {}).get("audience") == "staff", "the student edition's builder reads this"
    assert "widgets" not in nb.metadata and nb.metadata.get("kernelspec", {}).get("name") == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.slow
def test_notebook_runs_top_to_bottom():
    import nbformat
    from nbclient import NotebookClient

    from course_utils.kernel_client import SteadyKernelManager
    R.results()         # a stale cache is rebuilt, as the notebook's first cell would
    nb = nbformat.read(NOTEBOOK, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", kernel_manager_class=SteadyKernelManager,
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    seconds = time.perf_counter() - t0
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"]
    assert not errors, f"error or stderr output: {errors[0]}"
    print(f"beyond_ppo.ipynb ran top to bottom in {seconds:.1f} s (wall clock; its budget is a benchmark's)")


def test_loading_a_lab_leaves_the_random_state_alone():
    """Loading runs the lab's cells (which sample): a run that loads Lab 11 half-way (GRPO's first k3)
    must be the same run as one that had it loaded already."""
    import random
    B._LABS.pop("lab11", None)
    torch.manual_seed(0)
    random.seed(0)
    B.lab("lab11")
    after_loading = (torch.rand(3).tolist(), random.random())
    torch.manual_seed(0)
    random.seed(0)
    assert after_loading == (torch.rand(3).tolist(), random.random())


def test_the_cache_records_the_machine_that_made_it(cached):
    made_on = cached.get("made on")
    assert made_on and {"processor", "capability", "threads", "torch"} <= set(made_on), \
        "the Beyond PPO cache does not say which machine made it: `python -m course_staff.beyond.results --rebuild`"
