"""The names Lab 12 imports ``from prefs``, gathered from the modules that hold them.

    labeler       KAPPA, gold_score, ranked_data     the hidden labeler and its noisy rankings
    reward_model  digit_counts, DigitRM               the proxy reward model
    ppo_helpers   ValueModel, masked_mean, masked_whiten, sft_loss    the critic and PPO's helpers
"""

from course_utils.labeler import KAPPA, gold_score, ranked_data
from course_utils.ppo_helpers import ValueModel, masked_mean, masked_whiten, sft_loss
from course_utils.reward_model import DigitRM, digit_counts

__all__ = ["KAPPA", "gold_score", "digit_counts", "ranked_data", "DigitRM", "ValueModel",
           "masked_mean", "masked_whiten", "sft_loss"]
