"""What SGLang and the router in front of it accept, as both sides need to know it.

Settings (:mod:`.settings`), sampling parameters (:mod:`.sampling`, :mod:`.sampling_types`),
what each router forwards (:mod:`.routers`), the engine's length limits (:mod:`.limits`), the
served model (:mod:`.identity`), aborting requests on the workers (:mod:`.workers`), the error
vocabulary (:mod:`.errors`) and the HTTP plumbing every client shares (:mod:`.tls`,
:mod:`.proxies`). The transport that sends episodes' requests is the episode side's
(:mod:`miles_verifiers.episodes.transport`).
"""
