"""``ls --where``/``--since``/``--until`` values: one rule per kind of value (version, number, commit or
digest, text, date), the same for every key and operator; a value not of its kind is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.common import clean_env, run_cli
from tests.helpers.recording import make_doc, put


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for i, torch in enumerate(("2.3.0", "2.4.0+cu121")):
        put(tmp_path / "runs", make_doc("run%d" % i, generated_at="2024-02-%02dT10:00:00Z" % (28 + i),
                                        environment={"packages": {"torch": torch}},
                                        hardware={"cuda_version": "12.%d" % i},
                                        results={"metrics": {"loss": 0.5 - i / 10}}))
    return tmp_path


def _ls(top: Path, *args: str):
    return run_cli("ls", "runs", *args, env=clean_env(RELAXREPRO_CACHE_DIR=str(top / "cache")), cwd=top)


@pytest.mark.parametrize("args, why", [
    (("--where", "pkg.torch>=2.3;DROP"), "--where 'pkg.torch>=2.3;DROP': '2.3;DROP' is not a version"),
    (("--where", "pkg.torch==2.3;DROP"), "--where 'pkg.torch==2.3;DROP': '2.3;DROP' is not a version"),
    (("--where", "cuda!=12.1 OR 1=1"), "--where 'cuda!=12.1 OR 1=1': '12.1 OR 1=1' is not a version"),
    (("--where", "metric.loss<1;DROP"), "--where 'metric.loss<1;DROP': '1;DROP' is not a number"),
    (("--where", "metric.loss<nan"), "--where 'metric.loss<nan': 'nan' is not a number"),
    (("--where", "metric.loss<1e999"), "--where 'metric.loss<1e999': '1e999' is not a finite number"),
    (("--where", "commit=ab' OR '1"), "--where \"commit=ab' OR '1\": \"ab' OR '1\" is not a commit or digest"),
    (("--where", "group=a\x1b[2Jb"), "holds a control character"),
    (("--since", "2026-13-45"), "--since '2026-13-45': no such date or time (UTC)"),
    (("--since", "2023-02-29"), "--since '2023-02-29': no such date or time (UTC)"),
    (("--until", "2026-01-01T24:00"), "--until '2026-01-01T24:00': no such date or time (UTC)"),
    (("--until", "2026-01-01T10:61"), "--until '2026-01-01T10:61': no such date or time (UTC)"),
    (("--since", "2026-01-01;DROP"), "--since '2026-01-01;DROP': expected a date YYYY-MM-DD"),
], ids=lambda a: " ".join(a) if isinstance(a, tuple) else "")
def test_a_value_not_of_its_kind_is_one_line_and_exit_2(tree, args, why):
    res = _ls(tree, *args)
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert res.stderr.startswith("relaxrepro ls: error: ") and why in res.stderr
    assert res.stderr.count("\n") == 1


@pytest.mark.parametrize("args, ids", [
    (("--where", "pkg.torch>=2.3"), ["run0", "run1"]),
    (("--where", "pkg.torch==2.4.0+cu121"), ["run1"]),
    (("--where", "pkg.torch==2.4.*"), ["run1"]),
    (("--where", "cuda<12.1"), ["run0"]),
    (("--where", "metric.loss<.45"), ["run1"]),
    (("--where", "metric.loss>=-1e3"), ["run0", "run1"]),
    (("--since", "2024-02-29"), ["run1"]),  # a leap day
    (("--until", "2024-02-28T23:59:59Z"), ["run0"]),
], ids=lambda a: " ".join(a) if isinstance(a, tuple) else "")
def test_values_of_their_kind_still_select(tree, args, ids):
    res = _ls(tree, *args)
    assert res.returncode == 0, res.stderr
    assert [line.split()[0] for line in res.stdout.splitlines()[1:]] == ids
