"""Checkpoints of a cross-validated search (``KMPClassifierCV`` / ``KMPRegressorCV``): a killed driver resumes.

The search is a sequence of units, one (γ, fold) pursuit to the cap of its stage; what follows a
unit depends only on its result. So the checkpoint directory keeps every finished unit's result,
and a resumed fit replays the search, taking each unit's result from the directory instead of
fitting it again (docs/cross_validation.md, "Checkpoints: a killed driver"):

* ``state.ckpt`` — the search's header (estimator, parameters, the data's fingerprint: the KMP
  checkpoint's, greedy/_checkpoint.py) and the two seeds drawn from ``random_state`` (so that a
  ``random_state=None`` search resumes with the folds and pursuits it began with); marked
  complete once the refit is done;
* ``unit-<γ bits>-f<fold>-c<cap>.ckpt`` — one per finished unit: its result (numpy input: the
  held-out score of every prefix, a float array; store / dask input: the prefix scorer, which the
  stage's one pass over the rows scores), its seconds, whether it stopped before its cap, and
  (``n_basis="auto"``) the pursuit's state kept for a doubled cap (``PursuitExtension.saved``: the
  driver's state and the engine's journal, as a KMP checkpoint holds), so that a resumed search
  continues it as the uninterrupted one does; numpy input's kernel tables are named by tokens kept
  in ``state.ckpt``, which such a state refers to;
* ``stage-<γ grid digest>-c<cap>.ckpt`` — store / dask input: a stage's held-out scores, once its
  one pass over the rows has ended (a resumed search does not pass again for it);
* ``refit/`` — the refit on all rows, through the KMP estimator's own checkpoint.

Every file is written by the package's checkpoint writer (temporary file, fsync, ``os.replace``: a
kill mid-write leaves the previous state) with the search's header, and read back — after the
header check — by its restricted unpickler. A unit being fitted when the driver died is fitted
again from atom 1 (a pursuit is deterministic: the same atoms, scores and stop).
No dask here: the store is only fingerprinted through its own reader.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from pathlib import Path

from ..greedy._checkpoint import STATE_FILE, Checkpoint
from ..greedy._kmp import PursuitExtension
from ._base import open_fit_checkpoint
from ._inputs import fit_input, is_store_like

__all__ = ["FORMAT", "REFIT_DIR", "CVCheckpoint", "open_cv_checkpoint"]

REFIT_DIR = "refit"
"""The subdirectory of the refit's own (KMP) checkpoint."""

FORMAT = 1
"""The layout of the search's files (a header parameter: a directory of another layout is refused)."""


def _unit_name(gamma: float, fold: int, cap: int) -> str:
    """The part name of a unit: γ by its exact bits (no rounding can merge two widths)."""
    return f"unit-{struct.pack('>d', float(gamma)).hex()}-f{int(fold)}-c{int(cap)}"


class CVCheckpoint:
    """The checkpoint directory of one search: its seeds, its finished units and the refit's directory."""

    def __init__(self, main: Checkpoint):
        self.main = main
        self.n_replayed = self.n_recorded = 0  #: units taken from the directory / written to it (tests, benchmarks)

    @property
    def directory(self) -> Path:
        return self.main.directory

    def seeds(self, split_seed: int, fit_seed: int) -> tuple[int, int]:
        """The search's seeds: the saved ones when resuming, else these (saved now, before any unit)."""
        saved = self.main.restore_payload()
        if saved is not None and "seeds" in saved:
            return tuple(int(s) for s in saved["seeds"])
        self.main.saved = {"seeds": (int(split_seed), int(fit_seed))}
        self.main.save_payload(self.main.saved, iteration=0)
        return int(split_seed), int(fit_seed)

    def unit(self, gamma, fold, cap, fit, kept=None):
        """``fit()``'s ``((result, seconds), stopped)`` for the unit (γ, fold, cap): recorded on
        resume, else computed and recorded (atomically) before it is returned. ``kept``: the
        search's (γ, fold) → :class:`PursuitExtension` (``n_basis="auto"``): the unit's kept state
        is recorded with it and, on resume, put back, so a later stage continues it as the
        uninterrupted search does."""
        key = (float(gamma), int(fold))
        part = self.main.part(_unit_name(gamma, fold, cap))
        saved = part.restore_payload()
        if saved is not None:
            self.n_replayed += 1
            if kept is not None and saved.get("extension") is not None:
                kept.setdefault(key, PursuitExtension()).saved = saved["extension"]
            return (saved["result"], float(saved["seconds"])), bool(saved["stopped"])
        (result, seconds), stopped = fit()
        extension = kept[key].saved if kept is not None and key in kept else None
        part.save_payload({"result": result, "seconds": float(seconds), "stopped": bool(stopped),
                           "extension": extension}, iteration=int(cap), gamma=float(gamma), fold=int(fold))
        self.n_recorded += 1
        return (result, seconds), stopped

    def table_tokens(self, tokens: dict, gammas) -> None:
        """Name each width's in-process kernel table (numpy input) by a token kept in ``state.ckpt``:
        a recorded pursuit state names its table, so a resumed search registers the table under the
        same name (a token of this process's counter could be another width's)."""
        saved = self.main.saved.setdefault("tokens", {})
        for g in gammas:
            bits = struct.pack(">d", float(g)).hex()
            if bits not in saved:
                saved[bits] = f"row-table-cv-{uuid.uuid4().hex}"
                self.main.save_payload(self.main.saved, iteration=0)
            tokens.setdefault(float(g), saved[bits])

    def stage_scores(self, gammas, cap, scores=None):
        """Store / dask input: the held-out scores of a stage's units from its one pass over the
        rows — recorded (``scores`` given), or the recorded ones (None: not recorded), so that a
        resumed search does not pass over the rows again for a stage whose pass had ended."""
        name = "stage-" + hashlib.sha256(b"".join(struct.pack(">d", float(g)) for g in gammas)).hexdigest()[:16]
        part = self.main.part(f"{name}-c{int(cap)}")
        if scores is not None:
            part.save_payload({"scores": [list(row) for row in scores]}, iteration=int(cap))
            return scores
        saved = part.restore_payload()
        return None if saved is None else [list(row) for row in saved["scores"]]

    def has_units(self, gamma, folds, cap) -> bool:
        """Whether every unit (γ, f, cap), f in ``folds``, is recorded (then none is fitted)."""
        return self.main.resuming and all(
            (self.directory / f"{_unit_name(gamma, f, cap)}.ckpt").exists() for f in folds)

    def refit_kw(self) -> dict:
        """``fit`` keywords of the refit: its own checkpoint in ``refit/``, continued when there is one."""
        return {"checkpoint": self.directory / REFIT_DIR, "checkpoint_every": self.main.every, "resume": True}

    def complete(self, **status) -> None:
        """Mark the search done (``checkpoint_info(directory)["complete"]``); the unit files stay."""
        self.main.save_payload({**self.main.saved, "complete": True}, iteration=-1, complete=True, **status)


def open_cv_checkpoint(est, X, y, directory, every, resume) -> CVCheckpoint | None:
    """The search's checkpoint (None without ``directory``), checked against ``est``'s parameters
    and the data's fingerprint before any cluster starts (the KMP checkpoint's errors: an existing
    checkpoint without ``resume`` → ``FileExistsError``; another search's → ``ValueError`` naming
    every difference; ``resume`` without a directory or a bad ``checkpoint_every`` → ``ValueError``)."""
    if directory is None:
        return open_fit_checkpoint(est, None, every, resume, None, False)  # the resume / every checks
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"checkpoint must be a directory (kmp_dask writes its state files in it); got "
                         f"checkpoint={str(directory)!r}, which is a file. Pass a new or existing directory.")
    refit = path / REFIT_DIR
    if not resume and (refit / STATE_FILE).exists():
        raise FileExistsError(f"a checkpoint already exists at {refit / STATE_FILE} (the refit of an earlier "
                              "search); pass resume=True to continue it, or remove it to start a new fit")
    with fit_input(est, X, y, chunk_rows=est.chunk_rows, is_classifier=est._is_classifier) as store:
        main = open_fit_checkpoint(est, directory, every, resume, store, is_store_like(X), cv_checkpoint=FORMAT)
    return CVCheckpoint(main)
