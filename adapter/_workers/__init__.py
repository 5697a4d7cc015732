"""Episode backends: run the episodes of task groups in other processes (local or Ray actors)
or in the trainer's own process, behind one interface.

The rollout function keeps everything that must be central (task order, seeds, the replacement
budget, resume state, conversion to samples, Miles hooks, metrics); a backend only runs
``run_group`` for the groups it is handed and gives back plain trace records. Modules:

* :mod:`.protocol`: the versioned, JSON-serialisable messages between the two sides;
* :mod:`.framing`: length-prefixed frames for the local backend's pipes;
* :mod:`.records`: a Verifiers trace as a record, the one thing the trainer side reads;
* :mod:`.worker`: the episode-side handler (environments, renderer pool, one transport per
  call), the same in every backend;
* :mod:`.child`: the local worker process's main loop (stdin/stdout);
* :mod:`.local` and :mod:`.ray_backend`: the two worker backends (one link per worker);
* :mod:`.in_process`: the backend that runs the handler in the trainer's own event loop;
* :mod:`.procs`: what a local worker started, found through /proc, and how it is ended;
* :mod:`.pool`: hands groups to workers, detects lost workers, restarts and stops them;
* :mod:`.call`: the central side of one rollout call, whatever the backend.
"""
