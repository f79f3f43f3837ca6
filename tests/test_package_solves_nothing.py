"""No function of course_utils does a lab task's job with a few lines of glue.

A catalogue of "glue students": each implements one task of a lab as a few lines around a
course_utils function (or with a stand-in where the function wants a model), the way a student who
hunts the package for shortcuts would. Each is run, in-process, against every check cell of its task
in the instructor's notebook (visible and hidden checks), in the namespace of that notebook's own
definitions (``course_staff.solutions.load_lab``). Every glue student must fail a check, or be
refused (its helper rejects the stand-in); helpers deleted because they did a task's job are checked
to stay absent (``DELETED``). The solution itself passes the
same cells (the control that makes a failure mean something), and every task of every lab is in the
catalogue: either with glue students or with the reason why none applies. No task's function is defined
in course_utils under its own name, and the data Lab 13 ships (Lab 12's end state: its reward model,
offset, rankings and pairs) holds that and nothing more; a glue student looks Lab 12's pairs up in it.

    python -m tests.test_package_solves_nothing      # prints the catalogue and each student's outcome

What counts as glue here: calls of course_utils functions, public or private, on the task's inputs,
with a lambda or a small duck-typed class where a function takes a model. Not glue: subclassing the
course's TinyLM to override its forward pass, writing chosen weights into a TinyLM, monkeypatching
the package or setting a view's private attributes; such code does the task's work itself.
"""

import ast
import contextlib
import io
import textwrap
from pathlib import Path

import nbformat
import pytest

from course_staff.solutions import notebook_path
from tests import in_process
from course_staff.testbed.harness import LABS
from course_staff.testbed.lab_tables import table

# a stand-in "model": answers every prompt with the logits it was given (duck-typed, not a TinyLM)
STANDIN = '''
class _Logits:
    training = False
    def __init__(self, z):
        self.z = z
    def eval(self):
        return self
    def train(self, mode=True):
        return self
    def __call__(self, ids):                       # (B, L) -> (B, L, V): the same logits everywhere
        z = self.z if len(self.z) == len(ids) else self.z[:1].expand(len(ids), -1)
        return z[:, None, :].expand(-1, ids.shape[1], -1)

def _to_vocab(logits):
    """(B, V') logits as (B, 15): the toy's vocabulary, -inf beyond V'."""
    z = torch.full((logits.shape[0], 15), float("-inf"), dtype=logits.dtype)
    z[:, : logits.shape[1]] = logits
    return z
'''

# task (check cells test_<name>) -> {glue student: source}; or a string: why no course_utils function applies
CATALOGUE = {
    "lab11": {
        "response_logprobs": {
            "sequence_logprobs with a stand-in model": STANDIN + '''
from course_utils.tinylm import sequence_logprobs
def response_logprobs(logits, ids, prompt_len):
    mask = torch.ones(ids.shape[0], ids.shape[1] - prompt_len)
    return sequence_logprobs(lambda x: logits[:, : x.shape[1]], {"ids": ids, "prompt_len": prompt_len, "mask": mask})
''',
            "sequence_logprobs on a TinyLM subclass that returns the logits (beyond glue; still fails)": '''
from course_utils.tinylm import TinyLM, sequence_logprobs
class _Fixed(TinyLM):
    def __init__(self, logits):
        super().__init__()
        self.z = torch.full((*logits.shape[:2], 15), float("-inf"), dtype=logits.dtype)
        self.z[..., : logits.shape[-1]] = logits
    def forward(self, ids, *args, **kwargs):
        return self.z[:, : ids.shape[1]]
def response_logprobs(logits, ids, prompt_len):
    mask = torch.ones(ids.shape[0], ids.shape[1] - prompt_len)
    return sequence_logprobs(_Fixed(logits), {"ids": ids, "prompt_len": prompt_len, "mask": mask})
''',
        },
        "sequence_logprob": {
            "masked_mean per row, times the number of real tokens": '''
from course_utils.prefs import masked_mean
def sequence_logprob(tok_logp, mask):
    return torch.stack([masked_mean(t, m) * m.sum() for t, m in zip(tok_logp, mask.to(tok_logp.dtype))])
''',
            "sequence_logprobs of a stand-in whose log-softmax gives tok_logp, summed": STANDIN + '''
from course_utils.tinylm import sequence_logprobs
def sequence_logprob(tok_logp, mask):
    B, T = tok_logp.shape
    z = torch.full((B, T, 15), float("-inf"), dtype=tok_logp.dtype)
    z[..., 0], z[..., 1] = tok_logp, torch.log1p(-tok_logp.exp())     # log-softmax of z at token 0 = tok_logp
    out = {"ids": torch.zeros(B, T + 1, dtype=torch.long), "prompt_len": 1, "mask": mask.to(tok_logp.dtype)}
    return sequence_logprobs(lambda x: z, out).sum(-1)
''',
            "the same on a TinyLM subclass (beyond glue; still fails)": '''
from course_utils.tinylm import TinyLM, sequence_logprobs
class _Fixed(TinyLM):
    def __init__(self, z):
        super().__init__()
        self.z = z
    def forward(self, ids, *args, **kwargs):
        return self.z
def sequence_logprob(tok_logp, mask):
    B, T = tok_logp.shape
    z = torch.full((B, T, 15), float("-inf"), dtype=tok_logp.dtype)
    z[..., 0], z[..., 1] = tok_logp, torch.log1p(-tok_logp.exp())
    out = {"ids": torch.zeros(B, T + 1, dtype=torch.long), "prompt_len": 1, "mask": mask.to(tok_logp.dtype)}
    return sequence_logprobs(_Fixed(z), out).sum(-1)
''',
        },
        "sample_with_temperature": {
            "tinylm.sample at the temperature, with a stand-in model": STANDIN + '''
from course_utils.tinylm import sample
def sample_with_temperature(logits, temperature, generator=None):
    out = sample(_Logits(_to_vocab(logits)), ["0+0="] * len(logits), temperature=temperature, max_new=1,
                 generator=generator)
    return out["ids"][:, -1]
''',
            "tinylm.sample with a stand-in model, temperature left to the package's default": STANDIN + '''
from course_utils.tinylm import sample
def sample_with_temperature(logits, temperature, generator=None):
    return sample(_Logits(_to_vocab(logits)), ["0+0="] * len(logits), max_new=1, generator=generator)["ids"][:, -1]
''',
            "twotoken's tempered softmax of the logits, then torch.multinomial": STANDIN + '''
from course_utils.twotoken import two_token_policy
def sample_with_temperature(logits, temperature, generator=None):
    first, _ = two_token_policy((_to_vocab(logits).double().numpy(), np.zeros((15, 15))), temperature)
    probs = torch.from_numpy(first)[:, : logits.shape[1]].float()
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
''',
            "the two-token tables of a stand-in model, row by row, then torch.multinomial": STANDIN + '''
from course_utils.twotoken import two_token_logits, two_token_policy
def sample_with_temperature(logits, temperature, generator=None):
    rows, index = _to_vocab(logits).unique(dim=0, return_inverse=True)
    firsts = [two_token_policy(two_token_logits(_Logits(z[None]), "0+0="), temperature)[0] for z in rows]
    probs = torch.tensor(np.stack(firsts))[index][:, : logits.shape[1]].float()
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
''',
        },
        "kl_estimators": "k1, k2, k3 of sampled log-probs: nothing in course_utils computes a KL from samples "
                         "(KLEstimatorExperiment takes the student's own kl_estimators)",
        "tilted_optimum": {
            "tree_optimum.soft_values on a one-level tree": '''
from course_utils.tree_optimum import soft_values
def tilted_optimum(ref_probs, rewards, beta):
    with np.errstate(divide="ignore"):
        ref = [torch.log(torch.as_tensor(ref_probs, dtype=torch.float64)).reshape(1, 1, -1)]
    values, logp = soft_values(ref, [torch.as_tensor(rewards, dtype=torch.float64).reshape(1, 1, -1)], beta)
    return logp[0].exp().reshape(ref_probs.shape).numpy(), float(values[0][0, 0]) / beta
''',
            "tree_optimum.exact_optimum on a one-level tree": '''
from course_utils.tree_optimum import exact_optimum
def tilted_optimum(ref_probs, rewards, beta):
    with np.errstate(divide="ignore"):
        ref = [torch.log(torch.as_tensor(ref_probs, dtype=torch.float64)).reshape(1, 1, -1)]
    opt = exact_optimum(None, ref, [torch.as_tensor(rewards, dtype=torch.float64).reshape(1, 1, -1)], beta)
    return opt.logp[0].exp().reshape(ref_probs.shape).numpy(), float(opt.log_z[0])
''',
        },
        "kl_objective": {
            "the entropy of the Lab 11 views for the p log p part of the KL": '''
from course_utils.views.lab11 import entropy
def kl_objective(probs, ref_probs, rewards, beta):
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = -entropy(probs) - np.sum(probs * np.log(ref_probs))
    return float((probs * rewards).sum() - beta * kl)
''',
            "response_tree.kl_divergence and expectation on a one-level tree": '''
from course_utils.response_tree import expectation, kl_divergence
def kl_objective(probs, ref_probs, rewards, beta):
    as_tree = lambda a: [torch.as_tensor(a, dtype=torch.float64).reshape(1, 1, -1)]
    with np.errstate(divide="ignore"):
        kl = kl_divergence([t.log() for t in as_tree(probs)], [t.log() for t in as_tree(ref_probs)])
    return float(expectation(as_tree(probs), as_tree(rewards))[0] - beta * kl[0])
''',
        },
        "token_level_optimum": {
            "tree_optimum.soft_values on a two-level tree": '''
from course_utils.tree_optimum import soft_values
def token_level_optimum(first, second, rewards, beta):
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)
    with np.errstate(divide="ignore"):
        ref = [t(np.log(first)).reshape(1, 1, -1), t(np.log(second))[None]]
    values, logp = soft_values(ref, [torch.zeros(1, 1, len(first), dtype=torch.float64), t(rewards)[None]], beta)
    return (logp[0][0, 0].exp().numpy(), logp[1][0].exp().numpy(), values[1][0].numpy(), float(values[0][0, 0]))
''',
        },
    },
    "lab12": {
        "bt_loss": {
            "the labeler's own preference model (labeler.KAPPA) as the loss": '''
from course_utils.labeler import KAPPA
def bt_loss(r_chosen, r_rejected):
    return -torch.nn.functional.logsigmoid(KAPPA * (r_chosen - r_rejected)).mean()
''',
        },
        "ranking_to_pairs": {
            "Lab 13's shipped world: the pairs of a ranking in the same order, looked up": '''
import torch
from course_utils.lab13_world import WORLD_PATH
_raw = torch.load(WORLD_PATH, weights_only=True)["train"]
def ranking_to_pairs(ranking):
    ids, rankings, pairs = _raw["ids"].long(), _raw["rankings"].long(), _raw["pairs"].long()
    k = rankings.shape[1]
    for i in range(len(rankings)):
        rows = ids[i * k:(i + 1) * k]
        if rankings[i].tolist() == list(ranking) and len({tuple(r) for r in rows.tolist()}) == k:
            return [(a - i * k, b - i * k) for a, b in pairs.tolist() if i * k <= a < (i + 1) * k]
    return []
''',
        },
        "kl_penalized_rewards": "nothing in course_utils builds per-token rewards: sequence_logprobs gives "
                                "log-probs, the reward model a score per response",
        "gae_per_token": "nothing in course_utils computes advantages: the critic (ValueModel) gives values only",
        "ppo_rlhf_loss": "course_utils offers the statistics PPO needs (masked_mean, masked_whiten), no ratio, "
                         "clipping or value loss",
    },
    "lab13": {
        "dpo_loss": {
            "the labeler's preference model (labeler.KAPPA) on the implicit reward": '''
from course_utils.labeler import KAPPA
def dpo_loss(logp_chosen, logp_rejected, ref_chosen, ref_rejected, beta):
    margins = KAPPA * ((logp_chosen - ref_chosen) - (logp_rejected - ref_rejected))
    return -torch.nn.functional.logsigmoid(margins).mean(), margins
''',
        },
        "group_advantages": {
            "ppo_helpers.masked_whiten of each group": '''
from course_utils.ppo_helpers import masked_whiten
def group_advantages(scores, scale=True, eps=1e-6):
    centred = scores - scores.mean(1, keepdim=True)
    if not scale:
        return centred
    return torch.stack([masked_whiten(row, torch.ones_like(row), eps) for row in scores])
''',
            "masked_whiten of each group, rescaled from the population std to the k - 1 one": '''
from course_utils.ppo_helpers import masked_whiten
def group_advantages(scores, scale=True, eps=1e-6):
    centred = scores - scores.mean(1, keepdim=True)
    if not scale:
        return centred
    k = scores.shape[1]
    return torch.stack([masked_whiten(row, torch.ones_like(row), eps) for row in scores]) * ((k - 1) / k) ** 0.5
''',
        },
        "grpo_loss": "course_utils offers masked_mean for the token mean, no ratio, clipping, k3 or per-response mean",
        "grpo_iteration": "course_utils samples (sample) and scores (lab13_world's World.score) but holds no training "
                          "loop: train_dpo and train_grpo are the notebook's given cells, calling the student's functions",
    },
}


def check_cells(lab):
    """{task function: [check cell sources]}: the check cells of each task of the lab's table
    (course_staff/testbed/lab_tables), from the source notebook (each holds the visible checks and, between its
    markers, the hidden ones). Concept checks ask for a number or a set read off an experiment, not
    for a function: they are not tasks here."""
    nb = nbformat.read(str(notebook_path(lab)), as_version=4)
    source = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell.source for cell in nb.cells}
    return {task.function: [source[gid] for gid, _ in task.checks] for task in table(lab).tasks}


_LABS = {}


def lab_of(name):
    if name not in _LABS:
        _LABS[name] = (in_process.reference(name), check_cells(name))     # loaded once per process
    return _LABS[name]


def run_checks(namespace, sources):
    """Run check cells in a copy of ``namespace``; returns None if all pass, else the first failure."""
    ns = dict(namespace)
    for source in sources:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, "<check cell>", "exec"), ns)      # noqa: S102 -- the course's own checks
        except Exception as err:  # noqa: BLE001 -- any failure of a check counts
            return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:160]
    return None


def outcome(lab, task, source):
    """("impossible" | "refused" | "fails a check" | "PASSES", detail) of one glue student: its helper
    is gone, the helper refuses the stand-in (TypeError), a check fails, or it passes them all."""
    namespace, cells = lab_of(lab)
    ns = dict(namespace)
    try:
        exec(compile(textwrap.dedent(source), f"<glue student for {task}>", "exec"), ns)   # noqa: S102
    except Exception as err:  # noqa: BLE001 -- its helper is gone
        return "impossible", f"{type(err).__name__}: {err}"[:160]
    failure = run_checks(ns, cells[task])
    if failure is None:
        return "PASSES", "every check of the task"
    return ("refused" if failure.startswith("TypeError") else "fails a check"), failure


STUDENTS = [(lab, task, name, source) for lab, tasks in CATALOGUE.items() for task, students in tasks.items()
            if isinstance(students, dict) for name, source in students.items()]


@pytest.mark.parametrize("lab, task, name, source", STUDENTS, ids=[f"{t}: {n}" for _, t, n, _ in STUDENTS])
def test_glue_student_fails_or_is_impossible(lab, task, name, source):
    verdict, detail = outcome(lab, task, source)
    assert verdict != "PASSES", f"{lab} {task}: the glue student '{name}' passes every check: course_utils does the task"


# helpers that once did a task's job and were deleted: they must not come back (a glue student built on
# one of them could only fail to import, so it is this check instead)
DELETED = {"pair_kl": "Lab 11's kl_objective", "tilt": "Lab 11's tilted_optimum",
           "_softmax": "Lab 11's sample_with_temperature (a tempered softmax)"}


def test_deleted_helpers_stay_absent():
    defined = course_utils_definitions()
    back = {name: f"{defined[name]} (it did {what})" for name, what in DELETED.items() if name in defined}
    assert not back, f"a deleted helper is back in course_utils: {back}"
    assert "ranked_data" in defined and "sample" in defined, "the scan finds course_utils' definitions"


def course_utils_definitions():
    """{name: module file} of every top-level function, class and name assigned in course_utils."""
    defined = {}
    for path in sorted((Path(__file__).resolve().parents[1] / "course_utils").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
                [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            defined.update({name: path.name for name in names})
    return defined


@pytest.mark.parametrize("lab_name", LABS)
def test_no_task_of_a_lab_is_defined_in_course_utils(lab_name):
    """A task's own function (Lab 13's dpo_loss, group_advantages, grpo_loss, grpo_iteration, ...) is
    never defined in the student package, under its name, whatever it does."""
    defined = course_utils_definitions()
    tasks = [task.function for task in table(lab_name).tasks]
    assert tasks and "masked_whiten" in defined, "the scan finds the lab's tasks and course_utils' definitions"
    found = {name: defined[name] for name in tasks if name in defined}
    assert not found, f"{lab_name}: course_utils defines a task's function: {found}"


# what course_utils/data/lab13_world.pt may hold: Lab 12's end state (course_staff/edition/build_lab13_world.py),
# nothing of Lab 13's results or checks
LAB13_WORLD = {"rm_w": (10,), "rm_offset": (), "train": {"ids", "rankings", "pairs"}, "held": {"ids", "rankings", "pairs"}}


def test_lab13_world_holds_lab12s_end_state_only():
    import torch
    from course_utils.lab13_world import WORLD_PATH

    raw = torch.load(WORLD_PATH, weights_only=True)
    assert set(raw) == set(LAB13_WORLD), f"{WORLD_PATH.name} holds {sorted(raw)}"
    for key, want in LAB13_WORLD.items():
        got = tuple(raw[key].shape) if isinstance(want, tuple) else set(raw[key])
        assert got == want, (key, got)
    for part in ("train", "held"):           # token ids, ranks and row numbers: integers, no numbers a check compares
        assert all(not t.is_floating_point() for t in raw[part].values()), part


@pytest.mark.parametrize("lab_name", LABS)
def test_every_task_is_in_the_catalogue_and_the_solution_passes(lab_name):
    """The control: every task of every lab is catalogued, and the instructor's solution passes the
    same check cells the glue students fail."""
    namespace, cells = lab_of(lab_name)
    assert sorted(cells) == sorted(CATALOGUE.get(lab_name, {})), \
        f"{lab_name}: a task without a catalogue entry (or one too many)"
    for task, sources in cells.items():
        assert run_checks(namespace, sources) is None, f"the solution of {task} fails its own checks"


if __name__ == "__main__":
    for lab, task, name, source in STUDENTS:
        verdict, detail = outcome(lab, task, source)
        print(f"{lab} {task:24s} {verdict:14s} {name}\n{'':40s}{detail}")
    for lab, tasks in CATALOGUE.items():
        for task, students in tasks.items():
            if isinstance(students, str):
                print(f"{lab} {task:24s} {'no candidate':14s} {students}")
