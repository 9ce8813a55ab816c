"""Core vector machines' one-vs-rest problems and MMDA's features: the problem loop and its checkpoints.

A binary problem ("label == positive") is :func:`run_problem` on an engine over the store's
rows: the core-set loop (:func:`~kmp_dask.greedy._cvm.core_vector_machine`), or for MMDA one
such loop per feature on the kernel deflated by the earlier ones. The problems of a
one-vs-rest multi-class fit are independent: :func:`fit_binary_problems` hands them to the
dask layer's map over problems (:meth:`kmp_dask.parallel.Tasks.map_problems`) — in turn on one
engine without a cluster or for one problem (its passes then run on the workers that hold the
rows), one dask task each otherwise (so a cluster with more workers finishes a many-class problem
sooner) — and keeps each problem's checkpoint. No dask here.
"""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass

import numpy as np

from ..blockops._cvm import cvm_effects
from ..blockops._engine import Engine
from ._checkpoint import checkpoint_info
from ._configs import config_given
from ._cvm import CVMConfig, core_vector_machine, mmda_feature

__all__ = ["fit_binary_problems", "run_problem", "ProblemConfig", "ProblemCheckpoint", "CheckpointSuperseded"]


class CheckpointSuperseded(RuntimeError):
    """A problem's task finds that its checkpoint belongs to a newer run of the fit."""


class ProblemCheckpoint:
    """One binary problem's checkpoint file (a :meth:`~kmp_dask.greedy._checkpoint.Checkpoint.part`,
    ``problem-<k>``): the core-set loop's state every ``every`` iterations and, for MMDA, after each
    feature — with the features found so far and the RNG's state, from which :func:`run_problem`
    restores the partitions (targets, deflating features) and continues."""

    def __init__(self, part, every: int, token: str | None = None):
        self.part, self.every, self.token = part, int(every), token
        self.q, self.features, self.rng = 0, [], None

    def maybe_save(self, loop, t: int, rng, *, cands=None, first: int | None = None, last: bool = False) -> None:
        """Every ``every`` iterations of the core-set loop (its last one needs no save: the problem's
        result follows); the RNG is this problem's (:attr:`rng`), saved with the loop's state."""
        if (t + 1) % self.every == 0:
            self.save(loop.state(), iteration=t)

    def save(self, loop, iteration=-1):
        if self.token is not None:  # a task of an earlier run of this fit (its driver gone): stop
            info = checkpoint_info(self.part.directory) or {}
            if info.get("run_token") != self.token:
                raise CheckpointSuperseded(
                    f"the checkpoint {self.part.directory} was resumed or finished by another run of this fit "
                    f"(run {info.get('run_token')!r}, this task's {self.token!r}); this task stops")
        self.part.save_payload({"q": self.q, "features": list(self.features), "rng": self.rng.bit_generator.state,
                                "loop": loop}, iteration=iteration, feature=self.q)


@dataclass(frozen=True)
class ProblemConfig(CVMConfig):
    """What defines every binary problem of a CVM / MMDA fit (built once by the estimator, or by
    :func:`fit_binary_problems` from its keywords): the core-set loop's
    :class:`~kmp_dask.greedy._cvm.CVMConfig` (``kernel``, ``kappa``, ``C``, ``eps``, ``n_rows``,
    ``candidates``, ``max_core``, ``points_per_pass``, ``certify_rows``, ``refill``) and, for MMDA,
    ``n_components`` features per problem (0: the CVM itself). Each problem's loops get it whole.
    """

    n_components: int = 0


def run_problem(engine: Engine, positive, config: ProblemConfig, *, seed, checkpoint=None, saved=None, callback=None):
    """One binary problem ("label == positive") on ``engine`` (an :class:`~kmp_dask.blockops.Engine`),
    configured by ``config``: the CVM (a :class:`CVMResult`), or with ``config.n_components`` the
    MMDA features — each a CVM on the kernel deflated by the earlier ones, sent to the partitions
    as a new projection column — as a list of ``(CVMResult, feature)`` with
    ``feature = (S, a, PSa, norm)`` (:func:`~kmp_dask.greedy._cvm.mmda_feature`).

    ``checkpoint``: a :class:`ProblemCheckpoint` (None: none); ``saved``: the payload it last saved
    (resume: the partitions get the targets and the saved features, then the loop continues from
    its saved state — the same model, bit for bit). ``callback``: the core-set loop's, per iteration.
    """
    rng = np.random.default_rng(seed)
    out, q0, loop = [], 0, None
    if saved is not None:
        out, q0, loop = list(saved["features"]), int(saved["q"]), saved["loop"]
        rng.bit_generator.state = saved["rng"]
    # the effects the uninterrupted run sent up to this moment, in order (same partition state)
    engine.run(None, None, [cvm_effects.targets(positive), cvm_effects.clear_features()]
               + [cvm_effects.add_feature(*f) for _, f in out])
    if checkpoint is not None:
        checkpoint.features, checkpoint.rng = out, rng
    c = config
    kw = dict(config=c, random_state=rng, checkpoint=checkpoint, callback=callback)
    if not c.n_components:
        if checkpoint is not None:
            checkpoint.q = 0
        return core_vector_machine(engine, resume=loop, **kw)
    for q in range(q0, c.n_components):
        if checkpoint is not None:
            checkpoint.q = q
        res = core_vector_machine(engine, n_features_deflated=q, resume=loop if q == q0 else None, **kw)
        feature = mmda_feature(c.kernel, res)
        if feature is None:  # w = 0: the deflated problem has no direction left
            break
        engine.run(None, None, [cvm_effects.add_feature(*feature)])
        out.append((res, feature))
        if checkpoint is not None and q + 1 < c.n_components:
            checkpoint.q = q + 1
            checkpoint.save(None, iteration=-1)  # a feature boundary: the next feature starts afresh
    return out


def _solve(engine: Engine, positive, seed, checkpoint, saved, callback, config):
    """:func:`run_problem` with the arguments :meth:`~kmp_dask.parallel.Tasks.map_problems` passes."""
    return run_problem(engine, positive, config, seed=seed, checkpoint=checkpoint, saved=saved, callback=callback)


def fit_binary_problems(tasks, store, positives, *, seeds, config: ProblemConfig | None = None,
                        timeout: float = 3600.0, checkpoint=None, on_problem=None, on_iteration=None, **keywords):
    """Run one binary problem per entry of ``positives``; returns their results in order.

    ``config``: the problems' :class:`ProblemConfig`, handed over whole (the estimators build it), or
    its fields as keywords (``kernel=…, kappa=…, C=…, eps=…, n_rows=…``, the others optional), built
    here once.

    ``tasks``: a :class:`~kmp_dask.parallel.Tasks`. Without a cluster: one in-process engine,
    problems in turn. One problem and a cluster: an actor engine (passes on the workers). Several
    problems and a cluster: one task each (``timeout``: the longest wait for the next result).

    ``checkpoint``: the fit's :class:`~kmp_dask.greedy._checkpoint.Checkpoint` (None: none). Each
    problem has its own part ``problem-<k>``: while it runs, its core-set loop's state
    (:class:`ProblemCheckpoint`, written by the worker task that runs it when problems are tasks:
    the directory must then be on a file system the workers share, as stores are); once it is
    done, its result (written by the driver, marked complete). The main file holds the seeds,
    the finished problems' numbers and the fit's elapsed seconds, rewritten (small) at every
    problem boundary; when the fit completes, all results — the parts are then removed. A
    resumed fit takes the finished problems' results from their parts and continues the
    others. ``on_problem(k, result, n_done)``: called on the driver as each problem finishes (in
    order of completion; after its checkpoint). ``on_iteration(k, record)``: after each core-set
    iteration of problem ``k`` when the problems run in turn on the driver (not as tasks).
    """
    config = config_given(ProblemConfig, config, keywords, owner="fit_binary_problems")
    t0 = time.perf_counter()
    token = uuid.uuid4().hex  # this run of the fit: tasks of an earlier run stop at their next save
    elapsed0 = 0.0
    if checkpoint is not None and checkpoint.saved is not None:
        elapsed0 = float(checkpoint.saved.get("elapsed", 0.0))
        seeds = list(checkpoint.saved.get("seeds", seeds))
    positives, seeds = list(positives), [int(s) for s in seeds]
    parts = {k: checkpoint.part(_part_name(k)) for k in range(len(positives))} if checkpoint is not None else {}
    done = {k: p.saved["result"] for k, p in parts.items() if p.saved is not None and "result" in p.saved}

    def save_main():
        checkpoint.save_payload({"positives": positives, "seeds": seeds, "done": sorted(done),
                                 "elapsed": elapsed0 + time.perf_counter() - t0},
                                iteration=len(done) - 1, problems_done=len(done), run_token=token)

    if checkpoint is not None:
        save_main()

    def finished(k, result):
        done[k] = result
        if checkpoint is not None:
            parts[k].save_payload({"result": result}, complete=True, problem=int(k))
            save_main()
        if on_problem is not None:
            on_problem(k, result, len(done))

    todo = [k for k in range(len(positives)) if k not in done]
    if todo:
        as_tasks = tasks.distributed and len(positives) > 1
        problems = [(k, (positives[k], seeds[k], *_problem_checkpoint(k, parts, checkpoint, token, as_tasks),
                         _iteration_callback(on_iteration, k, as_tasks))) for k in todo]
        tasks.map_problems(store, functools.partial(_solve, config=config), problems, finished=finished,
                           setup=[cvm_effects.init(config.kernel)], as_tasks=as_tasks, timeout=timeout,
                           what="one-vs-rest problem")
    results = [done[k] for k in range(len(positives))]
    if checkpoint is not None:
        _save_results(checkpoint, parts, results, seeds, elapsed0, t0, token)
    return results


def _iteration_callback(on_iteration, k, as_tasks):
    """``on_iteration(k, record)`` per core-set iteration of problem ``k`` — on the driver only
    (problems run as tasks report as each finishes, through ``on_problem``)."""
    return None if on_iteration is None or as_tasks else functools.partial(on_iteration, k)


def _problem_checkpoint(k, parts, checkpoint, token, detached=False):
    """Problem ``k``'s :class:`ProblemCheckpoint` (None without a checkpoint) and the payload its
    part last saved (None: none)."""
    pc = ProblemCheckpoint(parts[k].detached() if detached else parts[k], checkpoint.every, token) \
        if k in parts else None
    saved = parts[k].saved if k in parts else None
    return pc, saved


def _save_results(checkpoint, parts, results, seeds, elapsed0, t0, token):
    """The completed fit's checkpoint: every result in the main file, the problems' parts removed."""
    checkpoint.save_payload({"result": results, "seeds": seeds, "elapsed": elapsed0 + time.perf_counter() - t0},
                            iteration=len(results) - 1, complete=True, problems_done=len(results),
                            run_token=token)
    for part in parts.values():  # the main file holds every result now
        part.discard()


def _part_name(k: int) -> str:
    return f"problem-{k:05d}"
