"""Durable event log and live fan-out."""
