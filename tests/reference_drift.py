"""Does Lab 12's shipped reference curve still come from the code? A check that means "the code
changed", never "the CPU changed".

The reference curves (course_utils/data/lab12_reference_curves.json, made by
benchmarks/make_reference_curves.py) were trained on one machine. The same code on another CPU
(other vector kernels: AVX-512, AVX2, none; another thread count) rounds float32 reductions
differently in the last bits, and a PPO run amplifies those bits: measured on an AMD EPYC against
the file made on an Intel Xeon, the default run's sampled metrics agree exactly for the first 29
iterations, its KL to 7e-4 nats; beyond that the runs go their own ways, like two seeds. So the check
compares what is stable across machines:

* the fitted reward model, at a float32 relative tolerance (``RM_RTOL``);
* the first ``EARLY`` iterations one by one: the sampled metrics to the file's rounding, the KL
  within ``KL_ATOL`` (a code change moves them at once: the policy after the first update differs);
* the end of the run (the mean of its last third) within the 99% prediction interval of one more
  seed, from the reference seeds (Student's t): past the early iterations another machine's run is
  just one more seed. This part only catches a run that ends up elsewhere; the early part is what
  catches a small change of the code.
"""

from benchmarks import make_reference_curves as reference  # noqa: E402

EARLY = 15                   # iterations compared one by one: half of the earliest cross-machine divergence seen (29)
ROUNDING = 1e-4              # the file stores every value rounded to 4 decimals
KL_ATOL = 2e-3               # nats: 20x the largest difference of the first 15 iterations between machines (1e-4)
RM_RTOL = 1e-4               # relative, float32 weights after 300 Adam steps (measured: 1e-5 between machines)
SAMPLED = ("rm", "gold", "acc", "malformed", "digits", "beta")   # averages over the sampled batch
FIX = "rerun `python -m benchmarks.make_reference_curves` and commit the file"


def meta_problems(now, stored):
    """What in the file's meta differs from how the runs are made now (the machine it was made on
    is provenance, not a difference)."""
    problems = []
    for key, value in now.items():
        if key in reference.PROVENANCE:
            continue
        have = stored.get(key)
        if key in ("rm_weights", "rm_offset"):
            a, b = (value if isinstance(value, list) else [value]), (have if isinstance(have, list) else [have])
            same = len(a) == len(b) and all(abs(x - y) <= RM_RTOL * max(abs(y), 1e-3) for x, y in zip(a, b))
        else:
            same = have == value
        if not same:
            problems.append(f"meta[{key!r}] is {have!r} in the file, {value!r} now")
    return problems


T99 = {1: 63.66, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032}   # two-sided 99% quantiles of Student's t, by dof


def seed_band(values):
    """(lo, hi): the 99% prediction interval of one more seed given these seeds' values (at least
    +-10 roundings wide, for a metric all seeds agree on)."""
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
    half = max(T99[min(n - 1, 5)] * sd * (1 + 1 / n) ** 0.5 if n > 1 else 0.0, 10 * ROUNDING)
    return mean - half, mean + half


def last_third(values):
    tail = values[-(len(values) // 3 or 1):]
    return sum(tail) / len(tail)


def run_problems(now, seeds_stored, seed_index, early_only=False):
    """What in the run ``now`` ({key: [value per iteration]}) does not match the stored run of the
    same seed (``seeds_stored[seed_index]``) early on, or the band of every stored seed at the end."""
    problems = []
    stored = seeds_stored[seed_index]
    for key in reference.KEYS:
        tol = (KL_ATOL if key == "kl" else 0.0) + ROUNDING * 1.5
        n = min(EARLY, len(now[key]))
        for it in range(n):
            if abs(now[key][it] - stored[key][it]) > tol:
                problems.append(f"{key} at iteration {it} is {stored[key][it]} in the file, {now[key][it]} now "
                                f"(allowed: {tol:.4g})")
                break
        if early_only:
            continue
        if len(now[key]) != len(stored[key]):
            problems.append(f"{key}: {len(stored[key])} iterations in the file, {len(now[key])} now")
            continue
        lo, hi = seed_band([last_third(s[key]) for s in seeds_stored])
        end = last_third(now[key])
        if not lo <= end <= hi:
            problems.append(f"{key} over the last third is {end:.4f} now, outside the band of one more "
                            f"reference seed [{lo:.4f}, {hi:.4f}]")
    return problems


_MADE = {}


def made():
    """(lab, cache) as the reference script makes them (the lab's solution, the fitted reward model)."""
    if not _MADE:
        from course_staff.solutions import load_lab
        lab = load_lab("lab12")
        _MADE["lab"], _MADE["cache"] = lab, reference.reference_cache(lab)
    return _MADE["lab"], _MADE["cache"]


def shipped():
    from course_utils.reference_curves import load_reference_curves
    ref = load_reference_curves()
    assert ref is not None, f"the reference curves are missing: {FIX}"
    return ref


def default_run_problems(lab=None, cache=None, early_only=False, **changes):
    """Problems of the notebook's default run (RLHFConfig's own beta and seed) against the file; ``changes``
    are RLHFConfig fields to change (``early_only`` trains only the first EARLY iterations)."""
    if lab is None:
        lab, cache = made()
    if early_only:
        changes["iters"] = EARLY
    default = lab["RLHFConfig"]()
    now = reference.reference_run(lab, cache, default.beta, default.seed, **changes)
    ref = shipped()
    return (meta_problems(reference.reference_meta(lab, cache), ref["meta"])
            + run_problems(now, ref["runs"][default.beta], reference.SEEDS.index(default.seed), early_only))


__all__ = ["default_run_problems", "meta_problems", "run_problems", "EARLY", "FIX"]
