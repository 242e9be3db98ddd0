"""Lossless: ``adapter`` (read-only search over lossless-claw's SQLite DAG), ``schema`` (databases with
the plugin's real schema) and ``demo`` (the demo's lcm.db)."""
