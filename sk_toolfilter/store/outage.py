"""One warning per outage of the shared store, whichever part meets it first."""

from __future__ import annotations


class StoreOutage:
    """Shared by the parts that talk to one store (catalog versions, co-usage): the first failure
    of an outage warns, later ones do not; the first success after it says the store is back."""

    def __init__(self) -> None:
        self.active = False

    def begin(self) -> bool:
        """A call failed; True when this starts the outage (the caller warns)."""
        first, self.active = not self.active, True
        return first

    def end(self) -> bool:
        """A call succeeded; True when this ends an outage (the caller says the store answers again)."""
        ended, self.active = self.active, False
        return ended
