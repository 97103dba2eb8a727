"""Imports the built-in loops so that they register themselves (one import line per loop module)."""
