"""The seam between the two sides: messages, trace records, frames and worker processes.

Importable by both sides, importing neither; the trainer's backends carry these messages
(:mod:`miles_verifiers.trainer.backends`), :mod:`miles_verifiers.episodes.worker` answers them.
"""
