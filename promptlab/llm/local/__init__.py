"""The embedded local model's server: the instance pool, the batching engine and its worker process, the grammar
for structured replies, the CPU guard and the inference fingerprint."""
