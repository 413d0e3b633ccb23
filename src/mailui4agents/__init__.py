"""MailUI4Agents: a self-hosted mail gateway for humans and AI coding agents."""

__version__ = "0.1.0"
