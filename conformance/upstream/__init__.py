"""Miles' own Verifiers adapter under the suite: expected clause verdicts and their comparison."""
