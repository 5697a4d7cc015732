"""The backends that carry the protocol to the episode side: one interface, several transports.

* :mod:`.in_process`: the episode side in the trainer's own interpreter and event loop;
* :mod:`.local`: each worker a process with an interpreter of its own, over a pair of pipes
  (:mod:`.procs`: what it started, and how it is ended);
* :mod:`.ray`: each worker a Ray actor;
* :mod:`.link`: what the pool needs from one worker, whichever backend runs it;
* :mod:`.pool`: placement, lost workers, restarts;
* :mod:`.setup`: the describe exchange and the backend's assembly;
* :mod:`.call`: the trainer's side of one rollout call, whatever the backend.
"""
