"""How calls share the machine: `limits` (calls in flight per endpoint, requests and tokens per minute),
`single_flight` (one provider call per cache key at a time) and `call_loop` (the event loop thread on which
blocking calls make their network requests)."""
