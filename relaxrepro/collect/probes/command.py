"""The recorded command: argv and working directory."""

from __future__ import annotations

from ..context import Context
from ..runner import Outcome


def collect(ctx: Context) -> Outcome:
    data = {"argv": list(ctx.argv), "cwd": ctx.cwd, "source": ctx.argv_source}
    out = Outcome(data={"command": data})
    if not ctx.argv:
        out.status = "absent"
        out.warnings.append("no command recorded (give it after --, or call the API from the trainer)")
    return out
