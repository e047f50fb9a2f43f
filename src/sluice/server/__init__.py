"""The Sluice broker: network layer, request handlers, replica manager and delayed operations."""
