"""Adapter tests: qmd, Total Recall, Lossless, Cognee and the definition-first rules."""
