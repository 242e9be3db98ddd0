"""The ``memory-router`` command line: ``entry`` (the console script, which resolves a query once
and answers it from a warm daemon before it imports anything heavy, else in-process), ``main``
(the click commands), ``oneshot`` (a query answered in-process), ``help_text``, ``initialize``
(``memory-router init``) and ``interrupt`` (what a signal during a one-shot query does)."""
