"""miles-verifiers: run Verifiers V1 environments as a Miles rollout function.

Miles loads ``miles_verifiers.VerifiersRolloutFn`` (``--rollout-function-path``) or, on the
legacy path, ``miles_verifiers.generate_rollout``.
"""

__version__ = "0.1.0"
