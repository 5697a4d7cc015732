"""The seam between the two sides: what crosses it, importable by both and importing neither.

* :mod:`.messages`: the versioned, JSON-serialisable messages between the trainer side and the
  episode side (describe, setup, run a group, cancel, close);
* :mod:`.records`: a Verifiers trace as a plain record, the one thing the trainer side reads;
* :mod:`.framing`: length-prefixed frames, for the local backend's pipes;
* :mod:`.versions`: what each side runs, as both report it;
* :mod:`.worker_path`: the ``PATH`` an episode worker runs with.

The trainer side's backends that carry these messages live in
:mod:`miles_verifiers.trainer.backends`; the handler that answers them in
:mod:`miles_verifiers.episodes.worker`.
"""
