"""The figures of time that documents quote, by name (data only; benchmarks/figures.py renders them from
results/bench.json as bench.KEY, bench.KEY.default and bench.KEY.slow, and benchmarks/claims.py accepts them
as ``measured:`` backings of a notebook's sentences)."""

from course_staff.course import LABS

KINDS = ("", ".default", ".slow")       # this machine's figure, under ATEN_CPU_CAPABILITY=default, a slow laptop's
# KEY -> (the title bench.json's row starts with, digits shown)
ROWS = {"ppo_run": ("one PPO run (", 1), "lab13_experiment_1": ("Lab 13 Experiment 1", 0),
        **{f"run_all_{lab}": (f"Run All {lab} (fresh kernel)", 0) for lab in LABS},
        "run_all_start_here": ("Run All 00_start_here (fresh kernel)", 1),
        "run_all_beyond": ("Run All beyond_ppo (fresh kernel)", 0),
        **{f"autograde_{lab}": (f"autograde {lab}:", 1) for lab in LABS}}
# KEY -> (a title with {lab} in it, digits shown): the longest of its rows over the labs
LONGEST = {"run_all_longest": ("Run All {lab} (fresh kernel)", 0), "autograde_longest": ("autograde {lab}:", 1)}


def names():
    """Every quoted figure's name: bench.KEY, bench.KEY.default, bench.KEY.slow."""
    return {f"bench.{key}{kind}" for key in (*ROWS, *LONGEST) for kind in KINDS}
