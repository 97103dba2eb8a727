"""promptlab's own plugins: for each entry-point group, the modules that register promptlab's own entries
when imported (`promptlab.registry.Registry` imports them on its first lookup, before the installed entry
points of the group).

They are listed here rather than as entry points in the package's metadata so that a checkout whose metadata is
older than its code (an editable install) still finds them, and so that a registry's module never imports what
registers into it: `promptlab.llm` finds the simulated critics (`sim/...`) that `promptlab.critics` registers
without importing `promptlab.critics`.
"""

from __future__ import annotations

OWN: dict[str, tuple[str, ...]] = {
    "promptlab.models": (
        "promptlab.llm.providers.hosted",
        "promptlab.llm.providers.own_models",
        "promptlab.critics.simulated",
    ),
    "promptlab.loops": (
        "promptlab.loops.ape.loop",
        "promptlab.loops.creator_critic.loop",
        "promptlab.loops.gepa.loop",
        "promptlab.loops.opro.loop",
        "promptlab.loops.p3ro.loop",
        "promptlab.loops.pcee.loop",
        "promptlab.loops.pes.agent",
        "promptlab.loops.protegi.loop",
        "promptlab.loops.resample.loop",
    ),
    "promptlab.cache_backends": ("promptlab.llm.cache.location",),
}
"""Entry-point group -> promptlab's modules that register into it (scorers, executors and tools are registered
by the modules that define their registries)."""

__all__ = ["OWN"]
