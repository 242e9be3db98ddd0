"""Helpers the tests share that are not tests: fixtures' builders, the fault program, the
report writer, the fast tier's guard, the Cognee server harness."""
