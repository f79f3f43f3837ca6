"""Manual scores and resubmissions: a TA's score must not silently hide a new automatic one.

nbgrader keeps a TA's manual score when it regrades a resubmission (the gradebook's score is the
manual one whenever there is one), so a student who resubmits after a TA overrode a check cell
keeps that score whatever the new notebook earns. ``ReportManualScores`` (an autograde
preprocessor, after the grades are saved) logs each check cell where that happens; ``clear`` drops
a student's manual scores on the check cells of a lab so that the automatic ones count again.
Written answers, which only a TA grades (they have no automatic score), keep theirs: nbgrader
already marks them "needs manual grade" again after a resubmission.

    python -m course_staff.grading.manual_scores clear lab11 alice      # make clear-manual LAB=lab11 STUDENT=alice
"""

import os
import sys

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from course_staff.course import WITHHELD       # FlagTampering's comment: such cells stay flagged

SHADOWED = "MANUAL SCORE KEPT"      # starts every log line about a manual score that hides a new one


def counted_score(grade):
    """The score nbgrader counts for a grade cell: the TA's if there is one, else the automatic
    one; None when neither exists (a written answer waiting for a TA)."""
    if grade.manual_score is not None:
        return float(grade.manual_score) + float(grade.extra_credit or 0.0)
    return None if grade.auto_score is None else float(grade.auto_score)


def clear_command(lab, student):
    return f"make clear-manual LAB={lab} STUDENT={student}"


class ReportManualScores(NbGraderPreprocessor):
    """Log, per check cell, where a manual score stays in force over a different new automatic score."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        student, lab = info["student"], info["assignment"]
        with Gradebook(info["db_url"]) as gb:
            submission = gb.find_submission_notebook(info["notebook"], lab, student)
            for grade in submission.grades:
                if grade.manual_score is not None and grade.auto_score is not None \
                        and grade.manual_score != grade.auto_score:
                    self.log.warning("%s %s / %s / %s: the manual score %g stays in force; the new "
                                     "automatic score is %s. To count the automatic scores: %s",
                                     SHADOWED, student, lab, grade.name, grade.manual_score,
                                     f"{grade.auto_score:g}", clear_command(lab, student))
        return nb, resources


def clear(db_url, lab, student):
    """Drop the manual scores of ``student`` on the check cells of ``lab`` (the cells with an
    automatic score; written answers keep theirs); returns {cell: (manual, automatic)} of the scores
    dropped. A notebook held for review (tampering) stays flagged "needs manual grade"."""
    cleared = {}
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(lab, student)
        for notebook in submission.notebooks:
            held = any(WITHHELD in (c.auto_comment or "") for c in notebook.comments)
            for grade in notebook.grades:
                if grade.manual_score is not None and grade.auto_score is not None:
                    cleared[grade.name] = (grade.manual_score, grade.auto_score)
                    grade.manual_score = None
                    grade.needs_manual_grade = held
        gb.db.commit()
    return cleared


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "clear":
        print("usage: python -m course_staff.grading.manual_scores clear LAB STUDENT", file=sys.stderr)
        return 2
    _, lab, student = argv
    from course_staff.grading.class_grading import gradebook_url
    cleared = clear(gradebook_url(os.getcwd()), lab, student)
    for cell, (manual, auto) in cleared.items():
        print(f"{student} / {lab} / {cell}: manual score {manual:g} dropped; the automatic score {auto:g} counts")
    if not cleared:
        print(f"{student} / {lab}: no manual score on a check cell to drop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
