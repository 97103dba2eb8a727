"""Cache keys: the sha256 of a request's canonical JSON, with secrets left out."""

from __future__ import annotations

import hashlib
import json
from typing import Any

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


__all__ = ["SECRET_FIELDS", "cache_key"]
