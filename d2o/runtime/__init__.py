"""d2o.runtime: see docs/internals.md."""
