"""Cognee: ``adapter`` (the REST backend), ``question`` (what a relationship question asks),
``explore`` (follow-up searches), ``paths`` (graph paths) and ``results`` (answers -> contract)."""
