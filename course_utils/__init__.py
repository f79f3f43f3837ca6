"""The toy world of Labs 11 and 12, as students install it. One concept per module:

    tinylm         the toy LM: vocabulary, prompts "a+b=", TinyLM, sampling, the SFT checkpoint
    labeler        the hidden labeler: gold_score, KAPPA, noisy Plackett-Luce rankings
    reward_model   the proxy reward model DigitRM and its features (digit counts)
    ppo_helpers    what PPO needs besides the lab's tasks: the critic, masked statistics, the ptx loss
    prefs          the names Lab 12 imports "from prefs", gathered from the three modules above
    twotoken       Lab 11's enumerable toy: every two-token response of one prompt
    response_tree  Lab 12's response tree: every response of up to four tokens, exact expectations
    checks         the checks of the labs' test cells
    runtime        are we being graded, and a progress bar
    world          Lab 12's world: data sizes, seeds, the SFT model, rankings, reward model and offset
    evaluation     the metric schema and what the experiments measure (accuracy with ties as half, ...)
    runs           what Lab 12's experiments train, each thing once (RunCache), and the beta sweep
    selfcheck      a student's `make check`: runs the labs as the graders' visible checks do
    views/         plots and sliders: explore (needs, Unfinished), base (the view protocol, fast slider frames), lab11, lab12,
                   optimum (Lab 12's Experiment 8)

Nothing here solves a lab task; the graders' tools live in the separate package course_staff.
"""
