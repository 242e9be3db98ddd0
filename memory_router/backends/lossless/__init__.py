"""Lossless: ``adapter`` (read-only search over lossless-claw's SQLite DAG: ``location`` finds and
opens the file, ``tables`` reads its schema, ``terms`` what a query asks, ``search`` the SQL,
``ranking`` the relevance), ``schema`` (databases with the plugin's real schema) and ``demo`` (the
demo's lcm.db)."""
