"""Storage: SQLite (+ sqlite-vec, FTS5) in one file; one repository module per table family."""

from .db import Database, DriverInfo, select_driver

__all__ = ["Database", "DriverInfo", "select_driver"]
