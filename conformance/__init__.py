"""Conformance suite: proves that a Miles rollout function honours the Miles and Verifiers
contracts, through the public contract only (constructor input, train and eval inputs and
outputs, ``VERIFIERS_CONFIG`` and the loopback engine).

Run it with ``pytest conformance`` (or ``tox``); choose the adapter under test with
``--adapter module:attribute``. Each test names the clauses it checks (``clauses.py``), and a
run writes a clause-by-clause report to ``reports/conformance.{md,json}``.
"""
