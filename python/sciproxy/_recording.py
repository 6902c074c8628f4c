"""sciproxy.record(): the library's report of every call made inside a ``with`` block.

::

    with sciproxy.record(verify=True) as rec:
        out = sciproxy.wave.scalar(...)
    rec.reports       # one dict per call: kernel, device, performance (rates, roofline_fraction),
                      # timers, verification (None without verify=True or on the reference)
    print(rec.text())  # as the command line prints them
    rec.passed        # every verified call within its family's tolerance

The recording is the library's (sciproxy::Recording): it sees the calls made on the thread that
opened it, from Python or from anything else in the process on that thread. A family that does
not report yet adds nothing to it.
"""

from __future__ import annotations

import json

from . import _args, _sciproxy

__all__ = ["record", "Record"]


class Record:
    """What ``sciproxy.record()`` returns: a context manager and, inside and after the block,
    the reports recorded so far."""

    def __init__(self, verify: bool = False):
        self.verify = _args.boolean("verify", verify)
        self._native = None

    def __enter__(self) -> "Record":
        if self._native is not None:
            raise RuntimeError("record: this recording was already used; call sciproxy.record() "
                               "again for a new one")
        self._native = _sciproxy.Recording(self.verify)
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """Ends the recording (the ``with`` block does it); the reports stay readable."""
        if self._native is not None:
            self._native.close()

    @property
    def reports(self) -> list:
        """One dict per call, in the order the calls were made (the library's JSON form)."""
        return json.loads(self.json())

    def json(self) -> str:
        """The reports as a JSON array."""
        return "[]" if self._native is None else self._native.json()

    def text(self) -> str:
        """The reports as the command line prints them (Devito's format, with the roofline)."""
        return "" if self._native is None else self._native.text()

    @property
    def passed(self) -> bool:
        """True when every verified call passed (also when nothing was verified)."""
        return True if self._native is None else self._native.passed()

    def __len__(self) -> int:
        return 0 if self._native is None else len(self._native)

    def __repr__(self) -> str:
        state = "open" if self._native is not None and self._native.open else "closed"
        return f"<sciproxy.Record verify={self.verify} {state}, {len(self)} reports>"


def record(verify: bool = False) -> Record:
    """A context manager that records the report of every library call made in its block on
    this thread; ``verify=True`` also reruns each call on the reference backend and compares
    the outputs with the family's tolerance (``rec.passed``)."""
    return Record(verify)
