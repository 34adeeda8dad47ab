"""Judging a benchmark: the stored rule against past sessions (rule), the robust statistics
it uses (robust), the paired A/B rule (ab), and the policy that says what fails a test."""
