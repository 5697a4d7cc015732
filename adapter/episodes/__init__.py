"""The episode side: Verifiers environments, Renderers, and the model client they talk to.

:mod:`.worker` answers the protocol's requests (:mod:`miles_verifiers.protocol.messages`) for
every backend, with one :class:`~.worker.Generation` per Verifiers API: :mod:`.v02` (0.2.0) and
:mod:`.v04` (0.4). Shared by both: :mod:`.describe` tells the trainer side what construction
checks need, :mod:`.child` is a local worker process (:mod:`.template` the interpreter it forks
from), :mod:`.content` and :mod:`.inline_render` prepare messages for the renderers, and
:mod:`.transport` sends the renderers' token requests to SGLang.
"""
