"""How the loops read what a model writes: the way the design documents' schemas read it.

The seeds' reply schemas are pydantic models (P³RO, PES, PCEE) or a bare `json.loads` (PromptForge): extra
keys are ignored there, so here they are accepted and kept (`model_extra`, and so in the step's recorded
output). The generation schema still asks for no other keys (`additionalProperties: false`), which a
constrained decoder or a schema-following provider keeps to; only validation is as lenient as the seed.
"""

from __future__ import annotations

from pydantic import ConfigDict


def reply_config() -> ConfigDict:
    """The `model_config` of a schema a model writes: extra keys allowed and kept, none asked for."""
    return ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})


__all__ = ["reply_config"]
