"""The graders' and instructors' package, never shipped to students.

    course.py     what every staff tool shares: the course folder, its labs, nbgrader's config, cell kinds
    solutions.py  the reference solution of a lab, loaded from its source notebook
    grading/      the TAs': nbgrader's plugins, class grading, PostgreSQL, manual scores, late policy, CSVs
    edition/      the instructors': the student edition, the search for leaks, the written answers' rubrics
    beyond/       the staff notebook notebooks/beyond_ppo.ipynb: DPO, GRPO and PPO against the exact optima
"""
