"""The seam between the two sides: the versioned protocol, and the backends that carry it.

The trainer side (:mod:`miles_verifiers._trainer`) hands task groups to an episode backend
and reads plain trace records back; the episode side (:mod:`miles_verifiers._episodes`) answers
the same requests whichever backend carries them. Nothing here imports Verifiers or Renderers.

* :mod:`.protocol`: the versioned, JSON-serialisable messages between the two sides;
* :mod:`.records`: a Verifiers trace as a record, the one thing the trainer side reads;
* :mod:`.framing`: length-prefixed frames for the local backend's pipes;
* :mod:`.local` and :mod:`.ray_backend`: the two worker backends (one link per worker);
* :mod:`.in_process`: the backend that runs the episode side in the trainer's own event loop;
* :mod:`.procs`: what a local worker started, found through /proc, and how it is ended;
* :mod:`.pool`: hands groups to workers, detects lost workers, restarts and stops them;
* :mod:`.setup`: asks the episode side to describe the taskset, assembles the backend;
* :mod:`.call`: the trainer's side of one rollout call, whatever the backend.
"""
