"""The episode side: Verifiers environments, Renderers, and the model client they talk to
(:mod:`.worker` answers the protocol's requests; :mod:`.transport` sends tokens to SGLang)."""
