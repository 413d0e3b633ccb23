"""Turn drivers: small programs a runner starts as "the CLI" of one turn when the
agent itself is driven over a protocol (opencode's HTTP server, ACP over stdio)
rather than as a headless command. Each asks the gateway about tool calls with
the hook flow (:func:`mailui4agents.hooks.core.evaluate`, fail closed) and
prints JSON lines that :class:`protocol.DriverParser` reads."""
