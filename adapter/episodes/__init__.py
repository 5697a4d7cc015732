"""The episode side: Verifiers environments, Renderers, and the model client they talk to.

:mod:`.worker` answers the protocol's requests for every backend, with one generation per
Verifiers API (:mod:`.v02`, :mod:`.v04`); :mod:`.transport` sends token requests to SGLang.
"""
