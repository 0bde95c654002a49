"""The HTML pages ``report`` and ``verify --html`` write, shared below the commands (no command imports another):
:mod:`.html` (escaping, the blocks, a run's card), :mod:`.charts` (axes, the trace chart), :mod:`.twoway` (the
page of two runs), :mod:`.output` (where a page goes, and its atomic write)."""
