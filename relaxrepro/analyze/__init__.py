"""Analyses of recorded documents, below the commands that print them: the check judgement (``check``), the
document diff (``diff``), ancestry and descendants (``lineage``), a group's comparison (``compare``) and the
verdict on results and traces (``verify``). Pure over documents (``lineage`` and ``compare`` read the manifests
they find through the run index); nothing here prints, parses arguments or knows an exit code."""
