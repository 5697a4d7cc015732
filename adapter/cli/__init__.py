"""The ``miles-verifiers`` command line, as far as the adapter carries it.

Sub-commands (each module exposes ``register(subparsers)``):

* ``check`` (:mod:`.check_command`): report every construction problem without running;
* ``rollout``, ``demo``, ``engine``, ``tokenizers``: the test kit's, registered when it is
  installed (:mod:`.kit`); ``rollout``, the dry-run trainer, says what to install otherwise.

The pieces ``check`` and the kit's ``rollout`` share are here: :mod:`.arguments` (the
command-line surface), :func:`.namespace.build_namespace`, :func:`.schedule.plan_calls`,
:func:`.checks.check_construction`.
"""
