"""Tasks run by the batched env: their spaces, terms and registration."""
