import pytest

pytest_plugins = ["dsh.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _private_dsh_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test a ``$DSH_HOME`` of its own (a test may set another): nothing a test
    runs reads or writes the developer's ``~/.dsh``, such as its installation key."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path_factory.mktemp("dsh-home")))
