"""Checkpoint files (read, check, upgrade) and the shipped model."""
