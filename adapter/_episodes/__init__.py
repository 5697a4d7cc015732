"""The episode side: Verifiers environments, Renderers, and the model client they talk to.

:mod:`.worker` answers the seam's requests (:mod:`miles_verifiers._seam.protocol`) for every
backend, with one :class:`~.worker.Generation` per Verifiers API: 0.2.0 (:mod:`.calls`,
:mod:`.config`, :mod:`.clients`) and 0.4 (:mod:`.episodes04`, :mod:`.config04`,
:mod:`.records04`). :mod:`.describe` tells the trainer side what construction checks need;
:mod:`.child` is a local worker process; :mod:`.upstream` and :mod:`.upstream04` hold every
non-public upstream symbol used. The SGLang transport the client sends through is
:mod:`miles_verifiers._transport`.
"""
