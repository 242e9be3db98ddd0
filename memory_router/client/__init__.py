"""The thin client of the socket daemon: ``invocation`` (a query's arguments parsed once into a
``QueryArgs``, its text read once), ``thin`` (answers ``memory-router query`` over the Unix socket)
and ``wire`` (what the daemon and its clients share: protocol version, socket path, context)."""
