"""nbgrader configuration of the course (read by every `nbgrader` command run in this folder).

Each setting below answers a pitfall listed in the course's design notes. A mistake in this file
must not go unnoticed: nbgrader only logs an exception in its config and carries on with a partial
configuration, so any error here stops the process with a message instead.
"""

import atexit
import gc
import os
import sys
import traceback

try:
    from pathlib import Path

    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader import preprocessors as pp

    from course_staff.course import COURSE_ID
    from course_staff.grading import sandbox
    from course_staff.grading.late_policy import LatePolicy
    from course_staff.grading.manual_scores import ReportManualScores
    from course_staff.grading.nbgrader_plugins import (ClearWidgetState, FlagTampering, FlagWrittenAnswers,
                                              HideTestCode, ReportNotebookProblems, RestoreReadOnlyCells,
                                              StartKernelEarly, SurviveKernelDeath)
    from course_utils.selfcheck import ANSWER_STUB, CELL_LIMIT_S, CODE_STUB    # `make check` knows the same

    c = get_config()  # noqa: F821  (provided by traitlets when nbgrader loads this file)
    here = Path(__file__).resolve().parent

    # -- the course and where everything lives (absolute, whatever the working directory)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(here)
    c.CourseDirectory.source_directory = "source"
    c.CourseDirectory.release_directory = "release"
    c.CourseDirectory.submitted_directory = "submitted"
    c.CourseDirectory.autograded_directory = "autograded"
    c.CourseDirectory.feedback_directory = "feedback"
    c.CourseDirectory.db_url = os.environ.get("NBGRADER_DB_URL", f"sqlite:///{here / 'gradebook.db'}")
    # only notebooks are copied into release/: a .py next to a lab would carry its solutions along
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]

    # -- students see a stub that fails loudly, not an empty cell
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = ANSWER_STUB

    # -- release: no outputs and no widget state (stale images of a solution run would leak)
    c.GenerateAssignment.preprocessors = [
        pp.IncludeHeaderFooter, pp.InstantiateTests, pp.LockCells, pp.ClearSolutions, pp.ClearOutput,
        ClearWidgetState, pp.CheckCellMetadata, pp.ComputeChecksums, pp.SaveCells, pp.ClearHiddenTests,
        pp.ClearMarkScheme, pp.ComputeChecksums, pp.CheckCellMetadata]

    # -- autograde: a cell may run for CELL_LIMIT_S seconds (under NBGRADER_EXECUTION every cell of both labs takes
    #    under 4 s, the slowest being the setup cell; an infinite loop costs one timeout per cell
    #    that calls it); a deleted or re-typed test cell is restored from the gradebook
    c.Execute.timeout = CELL_LIMIT_S
    c.Execute.interrupt_on_timeout = True
    c.Execute.shutdown_kernel = "immediate"   # a kernel that imported torch is slow to exit politely
    # ... and its client polls in short slices: on a busy machine a missed zmq wake-up would otherwise
    #     hold a finished cell until its time limit (course_utils/kernel_client.py)
    # ... in a bubblewrap sandbox: no network, no secret, none of the course's files but the
    #     submission's own (a private copy), limits on CPU, memory, processes, file size
    #     (course_staff/grading/sandbox.py); a kernel that cannot be sandboxed is not started.
    #     SANDBOX=off opts out, with a warning on every command (docs/ta_guide.md)
    if sandbox.enabled():
        c.Execute.kernel_manager_class = "course_staff.grading.sandbox.SandboxedKernelManager"
    else:
        sandbox.warn_if_off()
        c.Execute.kernel_manager_class = "course_staff.grading.sandbox.GraderKernelManager"
    c.OverwriteCells.add_missing_cells = True
    # ... and the log names the student whose read-only cells were edited, but stays quiet about
    #     test cells that only lack their hidden tests (every honest submission)
    # ... and what is wrong with the file itself (a pasted cell, metadata gone, input(), ...) is one
    #     line about the student in the log and a note atop the feedback (ReportNotebookProblems)
    # ... and the graded kernel starts while the sanitizing runs (StartKernelEarly: the same kernel
    #     Execute would start, which Execute takes only if nothing of its launch changed meanwhile)
    c.Autograde.sanitize_preprocessors = [StartKernelEarly, ReportNotebookProblems, pp.ClearOutput,
                                          pp.DeduplicateIds, pp.OverwriteKernelspec, RestoreReadOnlyCells,
                                          pp.CheckCellMetadata]
    # a cell that kills the kernel (os._exit) fails like any other cell, the rest is still graded;
    # a notebook that rebinds the checks or patches torch/numpy/math is held at 0 for review; every
    # written answer waits for a TA (a blank one with its 0); a manual score that stays in force over
    # a resubmission's new automatic score is logged
    c.Autograde.autograde_preprocessors = [
        SurviveKernelDeath, ClearMetadataPreprocessor, pp.LimitOutput,
        pp.SaveAutoGrades, FlagTampering, FlagWrittenAnswers, ReportManualScores, pp.AssignLatePenalties,
        pp.CheckCellMetadata]
    # late submissions (against the due date in the gradebook): the course's penalty, its grace and
    # percent per started day as course_staff/grading/late_policy.py sets them (nbgrader's default is
    # no penalty); c.LatePolicy.grace_minutes / c.LatePolicy.percent_per_day here would change them
    c.AssignLatePenalties.plugin_class = LatePolicy
    # any stderr in a grade cell scores 0. Warnings never mean a wrong answer, so each check cell
    # silences them itself (course_utils.checks.no_warnings); nothing here filters outputs before
    # SaveAutoGrades, so autograde decides on the same outputs as `nbgrader validate` on a student's
    # machine, which knows nothing of this file (tests/test_validate_agrees.py)

    # -- feedback: hidden tests stay hidden (no source, no traceback that quotes them)
    c.GenerateFeedback.preprocessors = [pp.GetGrades, pp.ClearHiddenTests, HideTestCode,
                                        CSSHTMLHeaderPreprocessor]

    # -- the local exchange (a JupyterHub course sets its own root and db_url, see README)
    c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", str(here / "exchange"))
    c.ExchangeCollect.check_owner = False      # (formerly CollectApp.check_owner)

    # -- the process that loads this file (an nbgrader command) ends without the garbage collector's
    #    last passes over everything it imported (nbgrader, jupyter_server, sqlalchemy: ~110,000 objects):
    #    ~0.4 s of CPU per command, for memory the system takes back anyway. Only the end is spared:
    #    while it runs (a test session, the benchmark, a class's workers) garbage is collected as ever
    atexit.register(gc.freeze)
except Exception:  # noqa: BLE001 -- any error in this file must stop nbgrader, loudly
    traceback.print_exc()
    print("nbgrader_config.py is broken (see above); refusing to run with a partial configuration.",
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(3)
