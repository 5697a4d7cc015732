"""Release benchmarks for miles-verifiers: what the adapter costs and whether it keeps the
engine saturated.

Run them with ``tox -e bench`` (or ``pytest benchmarks``): every figure is written to a JSON
result, a Markdown table and a throughput plot. ``python -m benchmarks.compare old new``
shows a release's change against the last. Benchmarks measure; they assert nothing about
speed. See ``benchmarks/README.md``.
"""
