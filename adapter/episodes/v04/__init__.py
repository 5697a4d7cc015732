"""Episodes of Verifiers 0.4 environments (the ``Env`` / slots / ``run_slot`` V1 API).

:mod:`.config` loads and describes the environment (:mod:`.config_shape`: the config file as
users write it), :mod:`.episodes` runs and judges the slots, :mod:`.records` turns traces into
the protocol's records, :mod:`.harness_needs` checks what the seats' harnesses need, and
:mod:`.upstream` holds every non-public Verifiers 0.4 symbol used.
"""
