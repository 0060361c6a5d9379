"""Observability: the engine's event catalogue and the subscribers that turn
events into logs, metrics and spans."""
