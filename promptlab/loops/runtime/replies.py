"""How the loops read what a model writes: the way the design documents' schemas read it.

The seeds' reply schemas are pydantic models (P³RO, PES, PCEE) or a bare `json.loads` (PromptForge): extra
keys are ignored there, so here they are accepted and kept (`model_extra`, and so in the step's recorded
output). The generation schema still asks for no other keys (`additionalProperties: false`), which a
constrained decoder or a schema-following provider keeps to; only validation is as lenient as the seed.
"""

from __future__ import annotations

from pydantic import ConfigDict
from pydantic.json_schema import JsonDict


def reply_config(*asked: str) -> ConfigDict:
    """The `model_config` of a schema a model writes: extra keys allowed and kept, none asked for; `asked`
    names fields the generation schema requires although validation gives them a default (where the design document's
    field is optional, a grammar should still write it)."""

    def shape(schema: JsonDict) -> None:
        schema["additionalProperties"] = False
        if asked:
            schema["required"] = list(asked)

    return ConfigDict(extra="allow", json_schema_extra=shape)


__all__ = ["reply_config"]
