"""d2o.layouts: see docs/internals.md."""
