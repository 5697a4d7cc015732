"""The backends that carry the protocol to the episode side: in-process, local processes, Ray."""
