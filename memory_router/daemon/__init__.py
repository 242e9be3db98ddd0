"""The dispatch daemon: one warm router process fed JSON-lines queries.

``service.Service`` handles requests independently of any transport (``reload`` re-reads its
router-config.json and backends.json, ``watch`` watches them and the backends' data); ``stdio`` is the
stdin/stdout transport behind ``memory-router serve``; ``socket_server`` the Unix-socket transport
behind ``serve --socket`` (answered by the thin client in :mod:`memory_router.client.thin`, over
:mod:`memory_router.client.wire`); both run one ``lifecycle`` (startup, serve, shutdown with one
grace period, one signal handler); ``protocol`` parses request lines; ``stats`` keeps the counters behind
``{"op": "stats"}``. The commands: ``serve`` (:mod:`.serve`) and ``daemon status|stop|start``
(:mod:`.control`); ``describe`` words a backend's runtime facts for them and for ``memory-router
backends``. ``reload`` returns a ``Snapshot`` that the service swaps in whole, so it never
imports ``service`` (tests/unit/test_import_graph.py keeps the modules free of import cycles).
"""
