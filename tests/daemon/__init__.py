"""Daemon tests: the service, its transports, the client against it and the MCP server."""
