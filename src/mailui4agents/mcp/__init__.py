"""``agentmail mcp``: mail tools for models, as a stdio MCP server (docs/behaviour.md#mcp-tools).

The server lives in :mod:`mailui4agents.mcp.server`; this package imports
nothing heavy so that :mod:`mailui4agents.mcp.normalise` stays cheap to use.
(The MCP SDK itself is the top-level package ``mcp``.)
"""
