"""d2o.core: see docs/internals.md."""
