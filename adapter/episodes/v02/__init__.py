"""Episodes of Verifiers 0.2.0 (the ``Environment`` / ``episode`` V1 API); :mod:`.upstream`
holds every non-public upstream symbol the adapter uses, each checked by a test."""
