"""The course's late-submission policy (nbgrader's own default is no penalty at all).

A submission up to ``grace_minutes`` after the due date is on time (a slow upload, a clock off by a
minute). After that it loses ``percent_per_day`` percent of its score for every day or part of a
day late, so 10 % for the first day, 20 % up to two days, ..., and all of it from the tenth day.
nbgrader records the penalty per notebook (grades.csv: ``late_submission_penalty``; ``score`` is
the raw score minus it). Configured in nbgrader_config.py; a lab without a due date in the
gradebook is never late (``nbgrader db assignment add lab11 --duedate=...`` sets one).
"""

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

DAY = 24 * 3600


class LatePolicy(LateSubmissionPlugin):
    """Penalty = score x min(1, percent_per_day/100 x started days late after the grace period)."""

    grace_minutes = Float(15.0, help="Minutes after the due date that still count as on time").tag(config=True)
    percent_per_day = Float(10.0, help="Percent of the score lost per started day late").tag(config=True)

    def fraction_lost(self, seconds_late):
        """The share of the score a submission ``seconds_late`` after the due date loses."""
        late = seconds_late - 60 * self.grace_minutes
        if late <= 0:
            return 0.0
        return min(1.0, self.percent_per_day / 100 * math.ceil(late / DAY))

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        lost = self.fraction_lost(total_seconds_late)
        self.log.warning("%s is %.1f h late: loses %g %% of the score (course policy: %g %% per "
                         "started day after %g min of grace)", student_id, total_seconds_late / 3600,
                         100 * lost, self.percent_per_day, self.grace_minutes)
        return round(score * lost, 6)
