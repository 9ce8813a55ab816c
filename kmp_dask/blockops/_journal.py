"""Effects and the restore journal: how a lost partition is rebuilt, for any driver.

A pass over the partitions is ``engine.run(query, msg, effects=[...])``: every partition first
applies the *effects* in order — the only calls that change partition state — and then answers
the *query*, which reads state and returns small reductions without changing anything that
matters (scratch buffers aside). The engine records every effect it sends in a
:class:`Journal`; a partition rebuilt after its worker died replays the journal on freshly
loaded rows and is then, bit for bit, the partition that was lost (the effects are the same
functions with the same messages, applied in the same order).

The journal stays small because effects name a *slot* of partition state and may *reset* it:
recording an effect with ``resets=True`` drops earlier entries of the same slot and of its
sub-slots (``"kmp"`` resets ``"kmp.residual"`` too). E.g. a full residual recomputation makes
the rank-one updates before it irrelevant; a driver's init drops everything that driver did
before. Nested drivers (MMDA runs one CVM per feature over deflated state) use their own slots,
so their effects compose without any driver writing a restore routine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Effect", "Journal", "apply_effects"]


@dataclass(frozen=True)
class Effect:
    """A state-changing call ``op(partition, msg)`` made on every partition.

    Parameters
    ----------
    op : module-level function ``(Partition, msg) -> None`` (picklable)
    msg : the op's (small, picklable) message
    slot : the part of partition state it changes, dotted (``"kmp.residual"``)
    resets : whether it makes earlier effects of ``slot`` (and its sub-slots) irrelevant
    in_place : whether it may modify arrays already in the state (False: it only binds new
        ones, e.g. a pending column) — a pager then need not rewrite the arrays it loaded
    """

    op: Callable
    msg: Any = None
    slot: str = ""
    resets: bool = False
    in_place: bool = True


def _within(slot: str, scope: str) -> bool:
    return slot == scope or slot.startswith(scope + ".")


class Journal:
    """The effects a partition needs to be rebuilt, in order, compacted by slot resets."""

    def __init__(self):
        self.entries: list[Effect] = []

    def record(self, effects) -> None:
        for e in effects:
            if e.resets:
                self.entries = [x for x in self.entries if not _within(x.slot, e.slot)]
            self.entries.append(e)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)


def apply_effects(part, effects) -> None:
    """Apply ``effects`` to one partition, in order."""
    for e in effects:
        e.op(part, e.msg)
