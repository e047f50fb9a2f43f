"""Sluice: a Kafka-wire-compatible streaming platform written in Python."""

__version__ = "0.1.0"
