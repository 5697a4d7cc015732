"""The suite checking itself: its report, its drift summary, and that it can fail.

``doubles.py`` holds deliberately broken adapters; the tests here run the suite against them
in a subprocess and assert that the matching clauses fail.
"""
