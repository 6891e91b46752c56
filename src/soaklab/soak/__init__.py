"""The soak monitor (docs/soak.md): a real trainer watched until it ends, one JSON of evidence."""
