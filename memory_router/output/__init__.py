"""Writing answers: ``jsonout`` encodes them (any name, even one that is not UTF-8), ``outwrite``
writes a whole answer to standard output, whatever kind of file it is."""
