"""pytest finds the fixtures here; they and the helpers live in server_support.py (a
unique module name: every test folder has a conftest, so `from conftest import` is ambiguous)."""

from server_support import *  # noqa: F401,F403
