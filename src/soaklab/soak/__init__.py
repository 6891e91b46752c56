"""The soak monitor (DESIGN §9): a real trainer watched until it ends, one JSON of evidence."""
