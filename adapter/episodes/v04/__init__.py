"""Episodes of Verifiers 0.4 environments (the ``Env`` / slots / ``run_slot`` V1 API): loading
and describing (:mod:`.config`), running and judging (:mod:`.episodes`), records, harness needs,
and every non-public Verifiers symbol used (:mod:`.upstream`).
"""
