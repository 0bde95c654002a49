"""``LazyPattern``: a regular expression compiled on its first use.

relaxrepro compiles ~100 patterns; many serve one rare case (a PEM key in a string, nvidia-smi's table
on a machine that has none), yet compiling them at import cost every run several milliseconds.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import Any, Optional, Pattern


class LazyPattern:
    """Stands in for ``re.compile(pattern, flags)``: ``sub``, ``search``, ``match``... compile it on first use.

    Not for a hot pattern (each use pays an attribute lookup through ``__getattr__``), nor for an argument
    to ``re`` functions, which want a real ``re.Pattern``.
    """

    __slots__ = ("pattern", "flags", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._rx: Optional[Pattern[str]] = None

    def __getattr__(self, name: str) -> Any:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.pattern, self.flags)  # two threads may both compile: same result
        return getattr(rx, name)
