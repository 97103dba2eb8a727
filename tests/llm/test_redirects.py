"""#41 item 8: one rule for redirects on both transports. A 3xx answer is an error named with its target (the
Location, without its query string), never followed to another origin, never retried: one request, on the direct
path (which retried a 302 as "invalid reply: not JSON", 3 requests) and through litellm (which said "Error code:
302", naming no target)."""

from __future__ import annotations

import pytest
from fault_server import FaultServer, Raw

import promptlab as pl
from promptlab.llm.call.settings import Settings

TRANSPORTS = ("auto", "litellm")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_redirect_is_named_never_followed_never_retried(transport: str, status: int) -> None:
    with FaultServer() as target, FaultServer() as server:
        location = f"{target.url}/chat/completions?api-key=sk-leak"
        server.default = Raw(b"", status=status, headers={"Location": location})
        settings = Settings(transport=transport, retries=3, backoff_s=0.001)
        with pytest.raises(pl.ProviderError) as err:
            pl.complete(server.model, "hi", api_base=server.url, api_key="sk-x", settings=settings, cache=False)
        message = str(err.value)
        assert f"HTTP {status}, a redirect to http://{target.host}/v1/chat/completions: not followed" in message
        assert "sk-leak" not in message and "api-key" not in message
        assert err.value.attempts == server.requests == 1 and not err.value.retryable
        assert target.requests == 0  # never followed


def test_a_redirect_without_a_location_is_named_too() -> None:
    with FaultServer(default=Raw(b"", status=302)) as server:
        for transport in TRANSPORTS:
            with pytest.raises(pl.ProviderError, match="HTTP 302, a redirect to no Location: not followed"):
                pl.complete(
                    server.model,
                    "hi",
                    api_base=server.url,
                    api_key="sk-x",
                    settings=Settings(transport=transport),
                    cache=False,
                )
        assert server.requests == 2
