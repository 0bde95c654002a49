"""``strip_credentials``: the one function that takes credentials out of a recorded URL, with an option per source
(a git remote, a package's direct URL, a tracker's URI), each pinned to the output its caller has always had."""

from __future__ import annotations

import pytest

from relaxrepro.manifest.redact import strip_credentials


@pytest.mark.parametrize("url, expected", [
    ("https://x-access-token:ghs_abc@github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://ghp_abcdef@github.com/o/r", "https://github.com/o/r"),
    ("https://user:pass@gitlab.example.com:8443/g/r.git", "https://gitlab.example.com:8443/g/r.git"),
    ("ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"),
    ("ssh://git:secret@host/r.git", "ssh://host/r.git"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("/srv/git/r.git", "/srv/git/r.git"),
    ("https://host/r.git?private_token=abc&ref=main", "https://host/r.git?ref=main"),
    ("https://host/r.git?ref=main#frag", "https://host/r.git?ref=main#frag"),
    ("HTTPS://host/r.git?", "https://host/r.git"),  # put back together by urllib
], ids=["x-access-token", "token-as-user", "user-pass-port", "ssh-user", "ssh-password", "scp-like", "local",
        "token-query", "fragment-kept", "urllib-spelling"])
def test_a_git_remote_loses_passwords_web_users_and_secret_parameters(url, expected):
    assert strip_credentials(url, users="secret", query="secrets") == expected
    assert strip_credentials(url) == expected  # the default


@pytest.mark.parametrize("url, expected", [
    ("git+https://user:ghp_secret@github.com/org/repo.git", "git+https://github.com/org/repo.git"),
    ("git+https://x-access-token:tok@github.com/org/repo", "git+https://github.com/org/repo"),
    ("git+ssh://git@github.com/org/repo.git", "git+ssh://git@github.com/org/repo.git"),
    ("https://github.com/org/repo.git", "https://github.com/org/repo.git"),
    ("git+ssh://deploy@host/org/repo.git", "git+ssh://host/org/repo.git"),
    ("https://u:p@host/pkg.whl?token=abc#sha256=00", "https://host/pkg.whl?token=abc#sha256=00"),
    ("HTTPS://host/pkg.whl?", "HTTPS://host/pkg.whl?"),  # nothing dropped: as given
], ids=["user-password", "x-access-token", "ssh-git-user-kept", "no-credentials", "other-ssh-user",
        "query-kept", "as-given"])
def test_a_direct_url_loses_every_user_but_git_and_keeps_its_query(url, expected):
    assert strip_credentials(url, users="not-git", query="keep") == expected


@pytest.mark.parametrize("uri, expected", [
    ("https://alice:s3cr3t@mlflow.example.com/api?token=abc#frag", "https://mlflow.example.com/api"),
    ("https://token@mlflow.example.com:5000", "https://mlflow.example.com:5000"),
    ("databricks://profile", "databricks://profile"),
    ("sqlite:////data/mlflow.db", "sqlite:////data/mlflow.db"),
    ("file:///runs/mlruns", "file:///runs/mlruns"),
], ids=["user-password-query", "token-as-user", "databricks-profile", "sqlite", "file-store"])
def test_a_tracking_uri_loses_every_user_and_its_query_and_fragment(uri, expected):
    assert strip_credentials(uri, users="any", query="drop") == expected


def test_any_user_is_found_in_free_text_and_the_rest_of_the_text_stays():
    text = "ConnectionError: http://bob:pw@mlflow:5000/api?x=1 and https://tok@host/a refused"
    assert strip_credentials(text, users="any", query="keep") == \
        "ConnectionError: http://mlflow:5000/api?x=1 and https://host/a refused"


@pytest.mark.parametrize("users, query", [("everyone", "keep"), ("secret", "all"), ("any", "secrets")])
def test_an_option_that_does_not_exist_is_refused(users, query):
    with pytest.raises(ValueError, match="not an option"):
        strip_credentials("https://u:p@host/", users=users, query=query)
