"""QMD: ``adapter`` (the backend), ``engine`` (the warm Node engine, ``qmd_engine.mjs``), ``keywords``
(natural language -> BM25 query), ``locate`` (the CLI, Node and models) and ``parse`` (qmd's JSON)."""
