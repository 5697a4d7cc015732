"""Unit tests of the benchmark tooling (result files, comparison, reports, /proc readers)."""
