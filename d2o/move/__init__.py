"""d2o.move: see docs/internals.md."""
