"""Episodes of Verifiers 0.2.0 environments (the ``Environment`` / ``episode`` V1 API).

:mod:`.config` loads the config file and the taskset, :mod:`.clients` the Verifiers client and
its renderer pool, :mod:`.calls` runs one call's episodes and winds them down, and
:mod:`.upstream` holds every non-public upstream symbol used, each checked by a test.
"""
