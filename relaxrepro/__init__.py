"""relaxrepro: one small, redacted, shareable manifest per ML run.

The public API is imported lazily, so ``import relaxrepro`` costs almost nothing in a trainer.
This file stays parseable by any Python 3 so the version guard in ``__main__`` can speak first.
"""

from relaxrepro._version import __version__

__all__ = ["__version__", "collect_manifest", "update_manifest", "write_manifest", "recorded", "load_manifest",
           "Manifest", "ManifestError", "trace", "should_stop", "result",
           "seed_everything", "runs"]

_LAZY = {
    "collect_manifest": "relaxrepro.api",
    "update_manifest": "relaxrepro.api",
    "write_manifest": "relaxrepro.api",
    "recorded": "relaxrepro.api",
    "trace": "relaxrepro.api",
    "should_stop": "relaxrepro.api",
    "result": "relaxrepro.api",
    "seed_everything": "relaxrepro.api",
    "load_manifest": "relaxrepro.manifest.reader",
    "ManifestError": "relaxrepro.manifest.reader",
    "Manifest": "relaxrepro.manifest.model",
    "runs": "relaxrepro.manifest.runindex",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'relaxrepro' has no attribute %r" % name)
    import importlib  # lazy: ~1 ms under python -S; only the first lazy name pays it

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
