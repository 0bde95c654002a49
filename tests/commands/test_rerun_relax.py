"""``relaxrepro rerun`` of manifests written by Relax's own implementation (tests/fixtures/relax): its
``<home>``, its ``"."`` working directory with one pathless repository, its ``config.environment``, and its
placeholders, which are refused like ours until ``--set`` supplies them. Scripts are really run with ``sh``."""

from __future__ import annotations

import json
import subprocess
import sys

from relaxrepro.commands import rerun
from tests.helpers.common import FIXTURES, clean_env, make_repo, run_cli
from tests.helpers.read import head, write_json

FIXTURE = FIXTURES / "relax" / "relax-A-argv-env.json"
COMMIT = "347a67574d993cad7eb8b5b6e1a9153cd56a5ece"

# Prints its arguments, cwd and two recorded variables as JSON.
ECHO = ("import json, os, sys; print(json.dumps({'args': sys.argv[1:], 'cwd': os.getcwd(), "
        "'env': [os.environ.get('HF_HOME'), os.environ.get('NCCL_DEBUG')]}))")


def _script(path, *args):
    res = run_cli("rerun", str(path), "--dry-run", *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_dry_run_of_a_relax_manifest_writes_home_commit_and_env_and_stops_on_redacted_values():
    text = _script(FIXTURE)
    # <home> is the home of whoever runs the script, as Relax's own rerun writes it
    assert ' --hf-checkpoint "${HOME}"/models/qwen ' in text
    assert 'export HF_HOME="${HOME}"/.cache/huggingface\n' in text
    assert "<home>" not in text
    # the recorded commit of the one repository, checked where the run ran (".")
    assert "(path or commit not recorded" not in text
    assert "relaxrepro_head=$(git -C . rev-parse HEAD 2>/dev/null) || relaxrepro_head=\n" in text
    assert 'if [ "$relaxrepro_head" != %s ]; then\n' % COMMIT in text
    # config.environment exported; its redacted values listed, not exported
    for line in ("export NCCL_DEBUG=INFO", "export CUDA_VISIBLE_DEVICES=0,1", "export PYTHONPATH=/srv/rlx/Relax"):
        assert line + "\n" in text
    for name, value in (("HF_TOKEN", "<redacted>"), ("WANDB_API_KEY", "<redacted>"),
                        ("RAY_ADDRESS", "<internal-host>")):
        assert "#   env %s: %s\n" % (name, value) in text
        assert "# not exported (redacted): %s\n" % name in text
        assert "export %s=" % name not in text
    # the old job's SLURM variables are the new job's business (srun would aim at a finished job)
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        assert "# not exported (set by SLURM for each job): %s\n" % name in text
        assert "export %s=" % name not in text and "env %s:" % name not in text
    assert "#   argv[3]: <redacted>\n" in text
    assert "echo 'relaxrepro: the command holds redacted values; see the comments at the top' >&2\nexit 1\n" in text
    assert '# (working directory recorded as ".": runs where this script is started)\n' in text
    assert "\ncd " not in text


def test_dry_run_with_every_redacted_value_supplied_has_no_exit_line():
    text = _script(FIXTURE, "--set", "argv[3]=KEY", "--set", "HF_TOKEN=t", "--set", "WANDB_API_KEY=w",
                   "--set", "RAY_ADDRESS=auto", "--set", "SLURM_JOB_NODELIST=node[1-2]")
    assert "exit 1\n" not in text.split("# -- code")[0]
    assert " --api-key KEY " in text
    assert "export HF_TOKEN=t\n" in text and "export RAY_ADDRESS=auto\n" in text


def test_confirm_refuses_relax_redacted_values_without_set():
    res = run_cli("rerun", str(FIXTURE), "--confirm")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("relaxrepro rerun: refused: the command or its env hold redacted values;")
    for line in ("  env HF_TOKEN: <redacted>", "  env RAY_ADDRESS: <internal-host>", "  argv[3]: <redacted>"):
        assert line in res.stderr.splitlines()


def _relax_doc(tmp_path, repo, argv, *, code=None):
    """Relax's fixture aimed at a real test repo: its commit, its argv, everything else as Relax wrote it."""
    doc = json.loads(FIXTURE.read_text())
    doc["command"]["argv"] = argv
    doc["code"] = code if code is not None else {"relax": dict(doc["code"]["relax"], commit=head(repo))}
    env = doc["config"]["environment"]
    for name in ("HF_TOKEN", "WANDB_API_KEY", "RAY_ADDRESS", "SLURM_JOB_NODELIST"):
        del env[name]
    return write_json(tmp_path / "manifest_relax.json", doc), doc


def test_the_script_of_a_relax_manifest_runs_in_its_repo_with_home_and_env(tmp_path):
    repo = make_repo(tmp_path / "repo", {"train.py": "print(1)\n"})
    home = tmp_path / "home"
    m, _ = _relax_doc(tmp_path, repo, [sys.executable, "-c", ECHO, "<home>/models/qwen", "--api-key", "<redacted>"])
    text = _script(m, "--set", "<redacted>=supplied")
    path = tmp_path / "replay.sh"
    path.write_text(text)
    res = subprocess.run(["sh", str(path)], capture_output=True, text=True, env=clean_env(HOME=str(home)),
                         cwd=str(repo), timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"args": ["%s/models/qwen" % home, "--api-key", "supplied"],
                                      "cwd": str(repo), "env": ["%s/.cache/huggingface" % home, "INFO"]}
    # elsewhere (not at the recorded commit) the same script stops before running anything
    other = make_repo(tmp_path / "other", {"x.py": "x\n"})
    res = subprocess.run(["sh", str(path)], capture_output=True, text=True, env=clean_env(HOME=str(home)),
                         cwd=str(other), timeout=60)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == "relaxrepro: repo relax at . is not at commit %s\n" % head(repo)


def test_two_pathless_repos_are_not_guessed(tmp_path):
    repo = make_repo(tmp_path / "repo")
    code = {"relax": {"commit": head(repo)}, "megatron": {"commit": "b" * 40}}
    m, _ = _relax_doc(tmp_path, repo, ["python", "train.py"], code=code)
    text = _script(m)
    assert text.count("# (path or commit not recorded: cannot be verified)\n") == 2
    assert "git -C" not in text


def test_plan_resolves_relax_home_to_this_home_for_confirm():
    doc = json.loads(FIXTURE.read_text())
    p = rerun.plan(doc, {}, {"HOME": "/home/u"})
    assert p.argv[5] == "<HOME>/models/qwen"
    assert p.local(p.argv[5]) == "/home/u/models/qwen"
    assert p.local(p.env["HF_HOME"]) == "/home/u/.cache/huggingface"
    assert (p.cwd, p.cwd_here) == (None, True)
    assert [(r.name, r.path, r.commit) for r in p.repos] == [("relax", ".", COMMIT)]
    # without a home, <home> cannot be replayed: it is listed with the redacted values
    p = rerun.plan(doc, {}, {})
    assert "argv[5]: <HOME>/models/qwen" in p.redacted
    p = rerun.plan(doc, {"<home>": "/elsewhere"}, {})
    assert p.argv[5] == "/elsewhere/models/qwen"
