"""Running the Verifiers rollout function the way Miles does, from the command line.

Sub-commands (each module exposes ``register(subparsers)``):

* ``rollout`` (:mod:`.rollout_command`): build Miles' namespace from Miles flags, construct the
  rollout function, point it at the embedded loopback engine or a real SGLang, run training
  rollouts and evaluations, write samples (JSON lines) and metrics (JSON), print a summary;
* ``check`` (:mod:`.check_command`): report every construction problem without running;
* ``demo`` (the test kit's ``demo_command``): ``rollout`` on the ``mv-arith`` fixture with small settings.

The pieces are usable on their own: :func:`.namespace.build_namespace`,
:func:`.schedule.plan_calls`, :func:`.session.run_rollouts`, :func:`.checks.check_construction`.
"""
