"""Agent files and tool sources (plugins, MCP servers, catalogs) and `load_agent`."""
