"""Unit tests: rules, config, CLI, client, shared words, docs, bench equivalence, the adapter seam."""
