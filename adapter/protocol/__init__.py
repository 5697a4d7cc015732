"""The seam between the two sides (importable by both, importing neither): messages, trace
records, frames and worker processes."""
