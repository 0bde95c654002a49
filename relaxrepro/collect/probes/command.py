"""The recorded command: argv and working directory."""

from __future__ import annotations

from ..context import Context
from ..runner import Outcome


def collect(ctx: Context) -> Outcome:
    # working_directory: Relax's name for cwd, which its schema and reader require ("." there means "where
    # the run was launched", recorded nowhere); ours holds the same path as cwd. Readers go by cwd.
    data = {"argv": list(ctx.argv), "cwd": ctx.cwd, "working_directory": ctx.cwd or ".",
            "source": ctx.argv_source}
    out = Outcome(data={"command": data})
    if not ctx.argv:
        out.status = "absent"
        out.warnings.append("no command recorded (give it after --, or call the API from the trainer)")
    return out
