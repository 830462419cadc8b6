"""The hub test's shared library runs on the store tests' PostgreSQL server fixture (tests/store/conftest.py)."""

from tests.store.conftest import pg_server

__all__ = ["pg_server"]
