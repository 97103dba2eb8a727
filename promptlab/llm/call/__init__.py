"""One call's protocol: the entry (`complete` / `acomplete`), the request, its steps, the transport that sends it,
what counts as a reply (wire, failures), the Completion it returns, the preflight and replay checks, settings and
structured output."""
