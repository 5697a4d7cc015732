"""Episode workers: run the episodes of task groups in other processes (local or Ray actors).

The rollout function keeps everything that must be central (task order, seeds, the replacement
budget, resume state, conversion to samples, Miles hooks, metrics); a worker only runs
``run_group`` for the groups it is handed and sends back plain trace records. Modules:

* :mod:`.protocol`: the versioned, JSON-serialisable messages between the two sides;
* :mod:`.framing`: length-prefixed frames for the local backend's pipes;
* :mod:`.records`: a Verifiers trace as a record, and a read-only view of a record that
  conversion and metrics accept in place of the trace;
* :mod:`.worker`: the worker-side handler (environments, renderer pool, one transport per call);
* :mod:`.child`: the local worker process's main loop (stdin/stdout);
* :mod:`.local` and :mod:`.ray_backend`: the two backends (one link per worker);
* :mod:`.procs`: what a local worker started, found through /proc, and how it is ended;
* :mod:`.pool`: hands groups to workers, detects lost workers, restarts and stops them;
* :mod:`.call`: the central side of one rollout call run on workers.
"""
