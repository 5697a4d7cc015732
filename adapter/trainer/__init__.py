"""The trainer side: what Miles loads and what must stay central to a run.

Options, construction checks, task scheduling and its resumable state, the training and
evaluation calls (groups in task order, bounded replacement), conversion of trace records to
Miles samples, Miles' own hooks and metrics, and the :mod:`.backends` that carry the protocol
(:mod:`miles_verifiers.protocol`) to the episode side. It never imports the episode side,
Verifiers or Renderers: the import contract in ``pyproject.toml`` holds it to that.
"""
