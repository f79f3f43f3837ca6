"""Lab 12's world: the SFT model, the labeler's rankings, the reward model fit to them and its offset.

    world = make_world(train_reward_model)               # the notebook's world (seed 0)
    world = make_world(train_reward_model, seed=3)       # another draw of the same world
    world.sft, world.train_data, world.held_out, world.rm, world.rm_offset

Everything that starts from Lab 12's reward model builds it here: the notebook's run cache
(``runs.RunCache``) and views, the reference curves, the science run and Beyond PPO. The reward model
is fit by the lab's own ``train_reward_model`` (the student's, or the instructor's reference). Which
seeds a world of seed s draws with is its caller's convention, passed as data (``seeds``, a function
of s); the default, ``spaced``, gives the notebook's world at s = 0.
"""

from dataclasses import dataclass

from course_utils.evaluation import sft_offset
from course_utils.labeler import ranked_data
from course_utils.tinylm import load_sft

N_PROMPTS = 2000   # prompts the labeler ranks for the reward model, and as many held out
K = 4              # responses ranked per prompt (6 pairs each: 12,000 pairs)
N_OFFSET = 2000    # SFT samples the RM offset averages over


@dataclass(frozen=True)
class Seeds:
    """The seeds of one world's draws."""
    rankings: int          # the rankings the reward model is fit on
    held_out: int          # the held-out rankings it is judged on
    reward_model: int      # train_reward_model's seed (its initialisation and batches)
    offset: int            # the SFT samples of the RM offset


def spaced(s):
    """Seeds 10 s, 10 s + 1, s, 10 s + 2: seed 0 is Lab 12's notebook (rankings of seed 0, held out of
    seed 1, train_reward_model's default seed 0, the offset of seed 2); Beyond PPO's seeds."""
    return Seeds(10 * s, 10 * s + 1, s, 10 * s + 2)


NOTEBOOK = spaced(0)


@dataclass
class World:
    """What every Lab 12 experiment starts from (``seed`` is the one its PPO runs use)."""
    seed: int
    sft: object            # TinyLM: the starting policy and the KL reference
    train_data: list       # ranked_data of N_PROMPTS prompts x K responses
    held_out: list         # as many other prompts, for judging the reward model
    rm: object             # train_reward_model(train_data, seed=...)
    rm_offset: float       # sft_offset of rm: SFT answers score about 0


def make_world(train_reward_model, seed=0, seeds=spaced, sft=None, n_prompts=N_PROMPTS, kappa=None):
    """Lab 12's world of ``seed``, drawn with ``seeds(seed)``; ``kappa``: the labeler's confidence."""
    sft = load_sft() if sft is None else sft
    s = seeds(seed)
    train = ranked_data(sft, n_prompts, k=K, seed=s.rankings, kappa=kappa)
    held = ranked_data(sft, n_prompts, k=K, seed=s.held_out, kappa=kappa)
    rm = train_reward_model(train, seed=s.reward_model)
    return World(seed, sft, train, held, rm, sft_offset(rm, sft, n=N_OFFSET, seed=s.offset))


__all__ = ["N_PROMPTS", "K", "N_OFFSET", "Seeds", "spaced", "NOTEBOOK", "World", "make_world"]
