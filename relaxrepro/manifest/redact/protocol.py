"""What the passes over text (assignments, tools, patches) need of the :class:`~.redactor.Redactor` that runs them.

A leaf module: each pass names the type here instead of importing redactor.py, which imports the passes.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; the protocol only types the passes' ``red`` argument
    from typing import List, Optional, Protocol, Tuple

    class Rules(Protocol):
        """The Redactor as a pass sees it: its counts, the secrets it remembers and its string rules."""

        def count(self, rule: str, n: int = 1) -> None: ...

        def remember(self, value: str) -> None: ...

        def judge(self, kind: int, value: str, rule: str = "secret-name", chase: bool = True
                  ) -> Tuple[str, bool]: ...

        def text(self, value: str, key: Optional[str] = None) -> str: ...

        def scan(self, s: str, mode: Optional[str] = None) -> str: ...

        def needles(self) -> Optional[List[str]]: ...
