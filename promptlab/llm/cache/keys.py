"""Cache keys, all decided here: the sha256 of canonical JSON, with secrets left out.

`call_key`: a call's final Completion (model, messages, generation parameters, the schema's JSON, the sample
index, and the endpoint's identity when a hosted model is called with an api_base, so two servers with one model
name never share replies); `reply_key`: one provider reply of a structured call, under its call's key.
`cache_key` hashes any payload."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..call.structured import schema_json

if TYPE_CHECKING:
    from ..providers.resolved import ResolvedModel

# Request fields that never enter a key nor the disk: secrets and where the secret is sent.
SECRET_FIELDS = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "extra_headers",
        "headers",
        "organization",
        "api_version",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "vertex_credentials",
    }
)


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of a request, secrets removed."""
    clean = {k: v for k, v in payload.items() if k not in SECRET_FIELDS}
    blob = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def call_key(
    model: ResolvedModel,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    schema: type[BaseModel] | None,
    sample: int,
) -> str:
    """The key of a call's final Completion: of the litellm model the requests go to (`model.target`), every
    generation parameter in `params` (secrets left out), and the endpoint's '<provider>@<host>' when the model
    is called with an api_base (`model.endpoint_id`)."""
    payload: dict[str, Any] = {
        "model": model.target,
        "messages": messages,
        "params": {k: v for k, v in params.items() if k not in SECRET_FIELDS},
        "schema": schema_json(schema) if schema is not None else None,
        "sample": sample,
    }
    if model.endpoint_id is not None:
        payload["endpoint"] = model.endpoint_id
    return cache_key(payload)


def reply_key(call: str, messages: list[dict[str, Any]]) -> str:
    """The key of the provider reply to `messages` within the call whose key is `call` (structured calls cache
    each reply, so a replay re-parses the same replies)."""
    return cache_key({"reply_of": call, "messages": messages})


__all__ = ["SECRET_FIELDS", "cache_key", "call_key", "reply_key"]
