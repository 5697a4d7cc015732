"""Episodes of Verifiers 0.4 environments (the ``Env`` / slots / ``run_slot`` V1 API)."""
