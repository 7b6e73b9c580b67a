pytest_plugins = ["dsh.testing.pytest_plugin"]
