"""The ``memory-router`` command line: ``entry`` (the console script, which answers a query from a
warm daemon before it imports anything heavy), ``query`` (one query resolved once, then answered by
a daemon or in-process), ``main`` (the click commands), ``oneshot`` (a query answered in-process),
``help_text``, ``initialize`` (``memory-router init``) and ``interrupt`` (signals during a one-shot
query)."""
