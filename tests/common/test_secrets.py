from porttrack.common import secrets


def test_registered_token_is_redacted_everywhere_in_a_text():
    secrets.register("s3cr3t-value-123")
    assert secrets.redact("a s3cr3t-value-123 b s3cr3t-value-123") == "a *** b ***"


def test_token_shapes_are_redacted_even_unregistered():
    text = "Authorization: token " + "ghp" + "_abcdefghijklmnopqrstuvwxyz0123456789 and " + "github_pat" + "_11ABCDEFG0123456789_abcdefghijkl"
    assert "ghp_" not in secrets.redact(text)
    assert "github_pat_" not in secrets.redact(text)


def test_resolution_order(monkeypatch):
    env = {"GH_TOKEN": "second-token", "GITHUB_TOKEN": "first-token"}
    assert secrets.resolve_token(env) == "first-token"
    assert secrets.resolve_token({"GH_TOKEN": "second-token"}) == "second-token"
    assert secrets.resolve_token({"PORTTRACK_NO_GH_CLI": "1"}) is None
