"""The model providers by prefix and the model a name resolves to: the registry, aliases, hosted models through
litellm, the direct OpenAI-compatible HTTP transport, the scripted model, and promptlab's own in-process models."""
