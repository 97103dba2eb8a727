"""Critics that are not models: `simulated` (model names `sim/...` that stand for a critic with known
properties; the grounded loops score with them, and the call path's model-name checks know them)."""
