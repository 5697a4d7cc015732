"""Miles' rollout-function contract: :mod:`.compat` picks Miles' types or the test kit's port."""
