"""The ``miles-verifiers`` command line: ``check``, plus the test kit's commands when installed."""
