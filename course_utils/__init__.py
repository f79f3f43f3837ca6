"""The toy world of Labs 11 to 13, as students install it. One concept per module:

    tinylm         the toy LM: vocabulary, prompts "a+b=", TinyLM, sampling, the SFT checkpoint
    dynamo_on_demand  torch.optim without importing torch's compiler until something compiles (tinylm installs it)
    memory         glibc malloc keeps the memory a large pass freed for the next one (tinylm sets it)
    labeler        the hidden labeler: gold_score, KAPPA, noisy Plackett-Luce rankings
    reward_model   the proxy reward model DigitRM and its features (digit counts)
    ppo_helpers    what PPO needs besides the lab's tasks: the critic, masked statistics, the ptx loss
    prefs          the names Lab 12 imports "from prefs", gathered from the three modules above
    twotoken       Lab 11's enumerable toy: every two-token response of one prompt
    response_tree  Lab 12's response tree: every response of up to four tokens, exact expectations
    tree_optimum   the exact KL-regularized optimum solved on that tree (soft values, tilted optimum)
    policy_evaluation  exact V^pi and Q^pi of a policy on that tree, and where a rollout's tokens sit on it
    critic_fit     a critic fitted to a frozen policy as train_rlhf fits its own (Lab 12's Experiment 10)
    checks         the checks of the labs' test cells
    explore        the explore cell's protocol: needs(task) turns "not finished yet" into one line
    runtime        are we being graded, and a progress bar
    parallel       independent runs side by side, one process each (the same results as one after another)
    world          Lab 12's world: data sizes, seeds, the SFT model, rankings, reward model and offset
    evaluation     the metric schema and what the experiments measure (accuracy with ties as half, entropy, ...)
    runs           what Lab 12's experiments train, each thing once (RunCache), and the beta sweep
    reference_curves  the course's reference sweep of Lab 12 (data), drawn behind a student's runs
    selfcheck      a student's `make check`: runs the labs as the graders' visible checks do
    views/         plots and sliders only: base (the view protocol, fast slider frames), lab11, lab12,
                   optimum (Lab 12's Experiment 8), critic (Experiment 10), length

Nothing here solves a lab task; the graders' tools live in the separate package course_staff.
"""
