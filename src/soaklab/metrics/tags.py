"""Tag names the trainer writes and the metrics reader looks for (no imports: the trainer reads this)."""

# The run identity (config hash, run dir) the trainer writes into its event file as text, so that
# `soaklab validate` can bind the file to its run.
IDENTITY_TAG = "soaklab/run_identity"
