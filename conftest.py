# Root conftest: the plugin itself arrives through its pytest11 entry point; the project's own
# tests also drive inner pytest sessions.
pytest_plugins = ["pytester"]
