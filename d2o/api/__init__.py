"""d2o.api: see docs/internals.md."""
