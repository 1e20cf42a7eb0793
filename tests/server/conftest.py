"""pytest finds the fixtures here; they and the helpers live in server_support.py (a
unique module name: every test folder has a conftest, so `from conftest import` is ambiguous)."""

from server_support import *  # noqa: F401,F403


def pytest_generate_tests(metafunc):  # type: ignore[no-untyped-def]
    """Modules with `ALL_BACKENDS = True` run each test on every back-end (server_support)."""
    if "backend" in metafunc.fixturenames and getattr(metafunc.module, "ALL_BACKENDS", False):
        metafunc.parametrize("backend", BACKENDS, indirect=True)  # noqa: F405


def pytest_configure(config):  # type: ignore[no-untyped-def]
    config.addinivalue_line("markers", "embedded_only: looks inside the local jobs or SQLite")
