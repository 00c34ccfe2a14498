"""d2o.ops: see docs/internals.md."""
