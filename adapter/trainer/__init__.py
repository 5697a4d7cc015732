"""The trainer side: what Miles loads (options, construction, scheduling, the training and
evaluation calls, conversion to Miles samples, hooks, metrics) and the :mod:`.backends` that
carry the protocol to the episode side. It never imports the episode side, Verifiers or
Renderers (the import contract in ``pyproject.toml``)."""
