"""The thin client of the socket daemon: ``thin`` answers ``memory-router query`` over the Unix
socket, ``wire`` is what the daemon and its clients share (protocol version, socket path)."""
