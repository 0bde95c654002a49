"""A value found by its name goes whole (issue 16, item 7): whatever characters it holds, to the end of its
word or line, or to its closing quote, in every channel where ``name=value`` / ``name: value`` text appears."""

from __future__ import annotations

from pathlib import Path

import pytest

from relaxrepro.manifest.redact import Redactor
from tests.helpers.common import clean_env, generate, make_repo
from tests.helpers.redact import leaked, password, strings


def _red() -> Redactor:
    return Redactor(home="/home/alice", hostname="gpu-node-17", user="alice")


def _masked(text: str, expected: str) -> None:
    r = _red()
    out = r.text(text)
    assert out == expected
    assert r.text(out) == out  # idempotent


# The middles a value stopped at before: '&', '#', ';', quotes, '=' and ',' (a space only where the form allows).
MIDDLES = {"amp": "&", "hash": "#", "semi": ";", "dquote": '"', "squote": "'", "eq": "=", "comma": ",",
           "paren": ")", "brace": "}", "backslash": "\\"}


@pytest.mark.parametrize("middle", list(MIDDLES.values()), ids=list(MIDDLES))
@pytest.mark.parametrize("form,expected", [
    ("my_db_pass: {}", "my_db_pass: ***"),  # the issue's .env line: 'Tr0ub4dor&3xyz' became '***&3xyz'
    ("+  password: {}", "+  password: ***"),
    ("DB_PASSWORD={}", "DB_PASSWORD=***"),
    ("export API_TOKEN={}", "export API_TOKEN=***"),
    ("--db-password={}", "--db-password=***"),
    ("ray start --redis-password {} --block", "ray start --redis-password *** --block"),
    ("+cfg.wandb.api_key={}", "+cfg.wandb.api_key=***"),
    ("secret_key = {}", "secret_key = ***"),
], ids=["yaml", "yaml-in-patch", "env", "export", "flag-equals", "flag-space", "hydra", "ini"])
def test_an_unquoted_value_goes_whole(form: str, expected: str, middle: str) -> None:
    _masked(form.format(password("whole", middle)), expected)


@pytest.mark.parametrize("text,expected", [
    ('{"password": "%s"}' % password("j", '\\"'), '{"password": "***"}'),
    ('{"password": "%s"}' % password("j", " & "), '{"password": "***"}'),
    ("password: '%s'" % password("y", "''"), "password: '***'"),  # YAML's escaped quote
    ('password: "%s"' % password("y", "#"), 'password: "***"'),
    ('DB_PASSWORD="%s" python x.py' % password("e", " ; "), 'DB_PASSWORD="***" python x.py'),
    ('password: "%s' % password("u", " #"), 'password: "***'),  # a quote left open: to the end of the line
    ("my_db_pass: %s  # rotated" % password("c", " "), "my_db_pass: ***  # rotated"),
    ("password = %s\nport = 5432" % password("i", " "), "password = ***\nport = 5432"),
], ids=["json-escaped-quote", "json-spaces", "yaml-single-quoted", "yaml-double-quoted", "shell-quoted",
        "unclosed-quote", "yaml-comment", "ini-spaces"])
def test_quoted_and_spaced_values_go_whole(text: str, expected: str) -> None:
    _masked(text, expected)


def test_a_yaml_block_scalar_under_a_secret_name_is_masked_line_by_line() -> None:
    pw = password("block", "&")
    text = "db:\n  password: |\n    %s\n    second %s\n  port: 5432\n" % (pw, pw)
    _masked(text, "db:\n  password: |\n    ***\n    ***\n  port: 5432\n")


@pytest.mark.parametrize("text,expected", [
    # What encloses or follows the assignment still ends the value: the rest of the line survives.
    ("https://h.example.com/f?token=%s&page=2" % password("q", "-"), "https://h.example.com/f?token=***&page=2"),
    ("DefaultEndpointsProtocol=https;AccountKey=%s;EndpointSuffix=core.windows.net" % password("az", "+"),
     "DefaultEndpointsProtocol=https;AccountKey=***;EndpointSuffix=core.windows.net"),
    ("mount -o username=bob,password=%s,uid=1000 //srv/x /mnt" % password("m", "&"),
     "mount -o username=<user>,password=***,uid=1000 //srv/x /mnt"),
    ("grant_type=password&password=%s&scope=read" % password("g", "#"), "grant_type=password&password=***&scope=read"),
    ("HF_TOKEN=%s python train.py --lr 3e-4" % password("s", "&"), "HF_TOKEN=*** python train.py --lr 3e-4"),
    ('conn = connect(password=%s, port=5432)' % password("py", "&"), "conn = connect(password=***, port=5432)"),
    ('"args": ["--password=%s", "--lr", "3e-4"]' % password("ja", "&"), '"args": ["--password=***", "--lr", "3e-4"]'),
    ('"cmd": "train --api-key=%s --lr 1"' % password("js", ";"), '"cmd": "train --api-key=*** --lr 1"'),
    ("db: {password: %s, port: 5432}" % password("fl", "&"), "db: {password: ***, port: 5432}"),
    ("Authorization: Bearer %s" % password("b", "&"), "Authorization: Bearer ***"),
], ids=["query", "connection-string", "mount-options", "form-body", "shell-prefix", "python-call", "json-list",
        "json-string", "yaml-flow", "authorization"])
def test_a_value_ends_where_its_context_ends_it(text: str, expected: str) -> None:
    _masked(text, expected)


@pytest.mark.parametrize("text", [
    "password: ${DB_PASSWORD}  # from the environment", "token: true", "password_file: /run/secrets/db pw",
    "the token budget is 512 & more", "max_new_tokens: 512 # tokens", "pass@1: 0.42 & pass@10: 0.61",
    "eos_token: '</s>'", 'api_key: "{{ secrets.KEY }}"', "Authorization: Bearer ***",
])
def test_values_that_hold_nothing_survive(text: str) -> None:
    r = _red()
    assert r.text(text) == text
    assert r.counts == {}


def test_an_env_file_in_a_patch_takes_its_values_to_the_end_of_the_line() -> None:
    spaced, hashed = password("envfile", " "), password("envfile2", "#")
    patch = ("diff --git a/.env b/.env\nnew file mode 100644\n--- /dev/null\n+++ b/.env\n@@ -0,0 +1,3 @@\n"
             "+DB_PASSWORD=%s # rotated\n+API_TOKEN=%s\n+PORT=5432\n" % (spaced, hashed))
    out, changed = _red().lines(patch)
    assert out.splitlines()[5:] == ["+DB_PASSWORD=*** # rotated", "+API_TOKEN=***", "+PORT=5432"]
    assert changed == [6, 7]


def test_a_block_scalar_in_a_patch_is_masked_and_stays_so_under_the_document_pass() -> None:
    pw = password("patch-block", "&")
    patch = ("diff --git a/conf.yaml b/conf.yaml\n--- a/conf.yaml\n+++ b/conf.yaml\n@@ -1,2 +1,5 @@\n db:\n"
             "+  password: |\n+    %s\n+    %s\n   port: 5432\n" % (pw, pw[::-1]))
    out, changed = _red().lines(patch)
    assert out.splitlines()[5:] == ["+  password: |", "+    ***", "+    ***", "   port: 5432"]
    assert changed == [7, 8]
    assert _red().text(out) == out  # the document pass over the stored patch changes nothing more


def test_argv_words_go_whole() -> None:
    pw = password("argv", " ")
    out = _red().argv(["train.py", "--db-password=" + pw, "--api-key", pw, "--note", "x"])
    assert out == ["train.py", "--db-password=***", "--api-key", "***", "--note", "x"]


# -- every channel, through the real CLI ---------------------------------------------------------------------

def test_values_go_whole_in_every_channel_of_a_written_manifest(tmp_path: Path) -> None:
    pw = {k: password("channel/" + k, m) for k, m in [
        ("env-colon", "&"), ("env-spaced", " "), ("env-quoted", ";"), ("env-export", "#"), ("env-squote", '"'),
        ("tracked", "&"), ("removed", "#"), ("script", "&"), ("config", " & "), ("argv-eq", "&"),
        ("argv-space", " ;"), ("argv-shell", "&"), ("env-var", "&"), ("env-opts", "#")]}
    repo = make_repo(tmp_path / "repo", {"conf/db.yaml": "db:\n  host: db.example.com\n  password: %s\n"
                                         % pw["removed"], "conf/train.yaml": "lr: 0.1\n"})
    (repo / "conf" / "db.yaml").write_text("db:\n  host: db.example.com\n  my_db_pass: %s\n" % pw["tracked"])
    (repo / ".env").write_text(  # untracked: embedded in the patch as a new file
        "my_db_pass: %s\nDB_PASSWORD=%s  # rotated\nAPI_TOKEN=\"%s\"\nexport SECRET_KEY=%s\nSMTP_PASS='%s'\n"
        % (pw["env-colon"], pw["env-spaced"], pw["env-quoted"], pw["env-export"], pw["env-squote"]))
    (repo / "run.sh").write_text("python train.py --db-password=%s --lr 0.1\n" % pw["script"])
    (tmp_path / "train.yaml").write_text("db:\n  password: %s\nlr: 0.1\n" % pw["config"])
    env = clean_env(MYAPP_DB_PASS=pw["env-var"], MYAPP_OPTS="--db-password=%s --verbose" % pw["env-opts"])
    doc = generate(tmp_path, "--env-prefix", "MYAPP_", env=env, cwd=repo, command=[
        "python", "train.py", "--config", str(tmp_path / "train.yaml"), "--db-pass=" + pw["argv-eq"],
        "--password", pw["argv-space"], "--setup", "PGPASSWORD=%s psql -h db" % pw["argv-shell"]])
    raw = next(tmp_path.glob("m_*.json")).read_text()
    text = raw + "\n".join(strings(doc))
    for name, secret in pw.items():
        assert not leaked(secret, text, window=6), name
    patch = doc["code"]["repo"]["patch"]["text"]
    for line in ["+my_db_pass: ***", "+DB_PASSWORD=***  # rotated", '+API_TOKEN="***"', "+export SECRET_KEY=***",
                 "+SMTP_PASS='***'", "+  my_db_pass: ***", "-  password: ***",
                 "+python train.py --db-password=*** --lr 0.1"]:
        assert "\n" + line + "\n" in patch, line
    assert doc["code"]["repo"]["patch"]["redacted_lines"]
    (content,) = [text for path, text in doc["config"]["file_contents"].items() if path.endswith("train.yaml")]
    assert content == "db:\n  password: ***\nlr: 0.1\n"
    assert doc["command"]["argv"][4:] == ["--db-pass=<redacted>", "--password", "<redacted>", "--setup",
                                          "PGPASSWORD=<redacted> psql -h db"]  # Relax's spelling in argv
    assert doc["config"]["selected_env"]["MYAPP_DB_PASS"] == "***"
    assert doc["config"]["selected_env"]["MYAPP_OPTS"] == "--db-password=*** --verbose"

