"""Imports the built-in loops so that they register themselves."""

from . import creator_critic, p3ro, pcee, pes  # noqa: F401
