"""The end-to-end and direct-baseline benchmarks against a real SGLang server on a GPU."""
