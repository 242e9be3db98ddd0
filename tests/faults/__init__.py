"""Fault-tolerance tests (tests/FAULTS.md is generated from them)."""
