"""Fakes of external services: real HTTP servers on loopback speaking the real wire formats."""
