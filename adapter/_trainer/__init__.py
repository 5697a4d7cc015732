"""The trainer side: what Miles loads and what must stay central to a run.

Options, construction checks, task scheduling and its resumable state, the training and
evaluation calls (groups in task order, bounded replacement), conversion of trace records to
Miles samples, Miles' own hooks and metrics. It imports neither Verifiers nor Renderers when
the episodes run in workers (:mod:`miles_verifiers._seam`); in-process, construction loads the
taskset through :mod:`miles_verifiers._episodes`.
"""
