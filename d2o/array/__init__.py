"""d2o.array: see docs/internals.md."""
