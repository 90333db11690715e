"""Plumbing every layer may use: atomic files, timing, the device, the CPU runtime, JSON and printable text, folder locks."""
