"""Episodes of Verifiers 0.4 environments (the ``Env`` / slots / ``run_slot`` V1 API): loading
and describing (:mod:`.config`), running, judging and recording (:mod:`.episodes`), harness needs,
and every non-public Verifiers symbol used (:mod:`.upstream`).
"""
