"""The ``agentmail`` command line: one module per command group, all over the client."""
