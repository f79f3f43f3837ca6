"""Independent runs on the cores a laptop has: each in a process of its own, with one thread.

    from course_utils.parallel import run_all, worker_count
    results = run_all(train_rlhf, [(sft, rm, rm_offset, cfg) for cfg in cfgs])   # [train_rlhf(*args), ...]
    worker_count()      # how many processes at once: COURSE_WORKERS if set, else the cores (at most 4)

``run_all(fn, jobs)`` returns what ``[fn(*args) for args in jobs]`` returns, bit for bit on one machine:
each job runs in a child process forked from this one (so ``fn`` may be a function the notebook
defined: a fork needs no pickling of it, the child simply has it), with torch on one thread as in
the kernel (``tinylm`` sets one thread), and sends its result back pickled. A run calls the same
functions on the same seeds in either place; nothing of one run reaches another.

Each run shows its own progress bar in a notebook: the bar that ``fn`` asks for with
``runtime.progress`` is drawn by this process from the child's steps (``runtime.relay_progress``).

Runs one after the other, here, instead (the same results):
- while nbgrader grades (``runtime.grading()``), and inside the grading sandbox (it sets
  COURSE_WORKERS=1);
- with one worker (COURSE_WORKERS=1, or ``workers=1``) or one job;
- where a process cannot be forked (Windows; macOS's Python offers fork, which is used): one line says so.
A job that fails in its child (an unfinished task raising NotImplementedError, a bug, a result that
cannot be pickled) is run again here, after the others, so its error and traceback are the
student's own, exactly as without workers.

    run_all(fn, jobs, workers=2, on_result=lambda i, result: ...)   # on_result: as each job ends
"""

import multiprocessing
import multiprocessing.connection
import os
import pickle
import warnings

from course_utils import runtime

ENV = "COURSE_WORKERS"          # the number of processes: 1 = serial
MAX_WORKERS = 4                 # a laptop's default: more processes than this gain little on the lab's runs
NO_FORK = "(PPO runs one after another here: this Python cannot fork a process to run them side by side)"
_said = set()                   # the one-line notes already printed this session


def cores():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_count(requested=None):
    """How many runs at once: ``requested``, else COURSE_WORKERS, else the cores (at most MAX_WORKERS)."""
    if requested is None and os.environ.get(ENV, "").strip():
        requested = os.environ[ENV]
    if requested is None:
        return max(1, min(MAX_WORKERS, cores()))
    return max(1, int(requested))


def can_fork():
    """True where a child process can be forked from this one (Linux, macOS; not Windows)."""
    return "fork" in multiprocessing.get_all_start_methods()


def run_all(fn, jobs, workers=None, on_result=None):
    """``[fn(*args) for args in jobs]``, the jobs side by side in up to ``workers`` processes.

    Args:
        fn: any function (a notebook's own included); jobs: a list of argument tuples;
        workers: processes at once (default ``worker_count()``); on_result: called as ``on_result(i, result)``
            when job i ends (here, in this process), e.g. to cache it before a later job fails.
    Returns:
        the results, in the order of ``jobs``. An error of ``fn`` is raised as without workers.
    """
    jobs = [tuple(args) for args in jobs]
    n = min(worker_count(workers), len(jobs))
    results = [None] * len(jobs)
    done = set()

    def finish(i, result):
        results[i] = result
        done.add(i)
        if on_result is not None:
            on_result(i, result)

    if n > 1 and not runtime.grading():
        if can_fork():
            _side_by_side(fn, jobs, n, finish)
        else:
            _say_once(NO_FORK)
    for i, args in enumerate(jobs):            # serial, and what failed in a child: the error is raised here
        if i not in done:
            finish(i, fn(*args))
    return results


def _say_once(line):
    if line not in _said:
        _said.add(line)
        print(line)


# ----------------------------------------------------------------------------- the processes
def _side_by_side(fn, jobs, n, finish):
    """Run ``jobs`` in forked children, ``n`` at a time; ``finish(i, result)`` each one that succeeds.
    A child that fails or dies leaves its job undone (run again by the caller)."""
    context = multiprocessing.get_context("fork")
    todo, running, bars = list(range(len(jobs))), {}, {}
    try:
        while todo or running:
            while todo and len(running) < n:
                i = todo.pop(0)
                started = _start(context, fn, i, jobs[i])
                if started is None:                    # no process here (a limit, no memory): serial
                    todo.clear()
                    break
                running[started[0]] = (i, started[1])
            for conn in multiprocessing.connection.wait(list(running)):
                i, process = running[conn]
                try:
                    kind, *payload = conn.recv()
                except (EOFError, OSError):            # the child is gone without a result
                    kind, payload = "failed", []
                if kind == "progress":
                    _progress(bars, i, *payload)
                    continue
                if kind == "done":
                    try:
                        finish(i, pickle.loads(payload[0]))
                    except Exception:                  # noqa: BLE001 -- cannot be read here: run it here
                        pass
                del running[conn]
                conn.close()
                process.join()
    finally:
        for conn, (_, process) in running.items():    # interrupted: stop the rest
            process.terminate()
            process.join()
            conn.close()
        for bar in bars.values():
            bar.close()


def _start(context, fn, i, args):
    """(the parent's end of a pipe, the started process) of job ``i``, or None if none can start."""
    parent_end, child_end = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(fn, args, child_end), daemon=True)
    try:
        with warnings.catch_warnings():                # Python 3.12+ warns on fork() with threads running
            warnings.simplefilter("ignore", DeprecationWarning)
            process.start()
    except OSError:
        parent_end.close()
        child_end.close()
        return None
    child_end.close()
    return parent_end, process


def _child(fn, args, conn):
    """In the child: one thread, progress to the parent, ``fn(*args)`` pickled back (or "failed")."""
    import torch

    torch.set_num_threads(1)
    runtime.relay_progress(lambda *step: conn.send(("progress", *step)))
    try:
        conn.send(("done", pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)))
    except BaseException:                          # noqa: BLE001 -- the parent runs it again and raises
        conn.send(("failed",))
    finally:
        conn.close()


def _progress(bars, i, desc, total, n):
    """Draw job ``i``'s bar at step ``n`` of ``total`` (a notebook only; nothing elsewhere)."""
    if not runtime.bars_here():
        return
    from tqdm.auto import tqdm

    bar = bars.get(i)
    if bar is None or bar.desc != desc:
        if bar is not None:
            bar.close()
        bar = bars[i] = tqdm(desc=desc, total=total, leave=False)
    bar.update(n - bar.n)


__all__ = ["ENV", "MAX_WORKERS", "cores", "worker_count", "can_fork", "run_all"]
