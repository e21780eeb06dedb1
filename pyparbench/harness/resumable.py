"""Run a list of measurements into a store, resuming where an earlier run stopped.

The main job's configurations and its operator tasks are both measured this
way: each item not in the store yet is run and its record appended at once
(flushed and synced), so an interrupted or crashed run loses no finished
result, and running the same list again skips what is already there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from pyparbench.harness.store import ResultStore, StoredRecord
from pyparbench.machine.fingerprint import machine_fingerprint

__all__ = ["Keyed", "StoredRecord", "record_status", "run_resumable"]


class Keyed(Protocol):
    """A measurement to make, with the key its record is stored under."""

    @property
    def key(self) -> str: ...


Item = TypeVar("Item", bound=Keyed)
# A configuration's typed result (Result), or an operator task's (OpResult).
Record = TypeVar("Record", bound=StoredRecord)


def record_status(record: StoredRecord) -> str:
    """A configuration's result's status, or an operator task record's."""
    return record.status


def run_resumable(items: Iterable[Item], store: ResultStore,
                  run_one: Callable[[Item, dict[str, Any]], Record],
                  read: Callable[[str, dict[str, Any]], Record], *,
                  resume: bool = True, retry_failed: bool = False,
                  on_result: Callable[[Item, Record | None], None] | None = None,
                  on_pending: Callable[[list[Item]], None] | None = None
                  ) -> Iterator[Record]:
    """Run every item whose key the store does not hold yet, appending each
    record as soon as it is known; yields the records, those taken from the
    store too.

    Parameters
    ----------
    run_one
        ``run_one(item, machine)`` measures one item and returns its record
        (it never raises for a failed measurement: the record says so);
        ``machine`` is this machine's fingerprint, which the records carry.
    read
        ``read(where, stored)``: a stored record as this kind of item's
        record; raises ValueError for one it cannot use.
    resume
        Skip the items the store holds (else run everything again).
    retry_failed
        Run again the items whose stored record is not ``ok``.
    on_result
        Called after each item with its record (None for one taken from the store).
    on_pending
        Called once, before anything runs, with the items that will be run
        (in order): a runner that measures several together learns which.

    Raises
    ------
    ValueError
        On resume, when the store holds another machine's or schema's records,
        or records ``read`` refuses.
    """
    # A store of another machine's records is refused on resume.
    machine = machine_fingerprint()
    done = dict(store.resumable(machine, read)) if resume else {}

    def held(item: Item) -> Record | None:
        previous = done.get(item.key)
        if previous is not None and (record_status(previous) == "ok" or not retry_failed):
            return previous
        return None
    if on_pending is not None:
        items = list(items)
        on_pending([item for item in items if held(item) is None])
    for item in items:
        previous = held(item)
        if previous is not None:
            if on_result:
                on_result(item, None)
            yield previous
            continue
        record = run_one(item, machine)
        store.append(record)
        if on_result:
            on_result(item, record)
        yield record
