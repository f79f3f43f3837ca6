"""Lab 12's world (course_utils.world) and the measures beside it (course_utils.evaluation)."""

import torch

from course_utils.evaluation import METRICS, RESPONSE_METRICS, noise_ceiling, pair_accuracy, response_metrics
from course_utils.tinylm import load_sft, make_batch, sample
from course_utils.world import K, N_OFFSET, NOTEBOOK, Seeds, make_world, spaced


def test_the_notebooks_world_is_seed_0_of_the_spaced_seeds():
    # the notebook: rankings of seed 0, held-out rankings of seed 1, train_reward_model's default
    # seed 0, the offset of seed 2 -- what Beyond PPO's world of seed 0 is too
    assert NOTEBOOK == spaced(0) == Seeds(rankings=0, held_out=1, reward_model=0, offset=2)
    assert spaced(3) == Seeds(30, 31, 3, 32)


def test_make_world_draws_each_part_with_its_seed():
    calls = []

    class Constant(torch.nn.Module):
        def forward(self, counts):
            return counts.sum(1)

    def train_reward_model(data, seed=0):
        calls.append((len(data), seed))
        return Constant()

    w = make_world(train_reward_model, seed=1, seeds=lambda s: Seeds(5, 6, 7, 8), sft=load_sft(), n_prompts=3)
    assert calls == [(3, 7)] and w.seed == 1
    assert len(w.train_data) == len(w.held_out) == 3 and all(len(d["ranking"]) == K for d in w.train_data)
    again = make_world(train_reward_model, seed=1, seeds=lambda s: Seeds(5, 6, 7, 8), sft=w.sft, n_prompts=3)
    assert [d["ranking"] for d in again.held_out] == [d["ranking"] for d in w.held_out]
    assert again.rm_offset == w.rm_offset and N_OFFSET == 2000


def test_pair_accuracy_counts_a_tie_as_half_and_the_ceiling_is_the_likelier_side():
    assert pair_accuracy(torch.tensor([1.0, -1.0, 0.0, 2.0])) == 0.625
    assert noise_ceiling(torch.tensor([0.9, 0.2, 0.5])) == torch.tensor([0.9, 0.8, 0.5]).mean().item()


def test_the_metric_schema_is_what_response_metrics_returns():
    out = sample(load_sft(), make_batch(8, __import__("random").Random(0))[0], generator=torch.Generator().manual_seed(0))
    assert tuple(response_metrics(out)) == RESPONSE_METRICS and set(RESPONSE_METRICS) < set(METRICS)
