"""What a benchmark is judged against: the key naming a baseline, the store of past sessions
beside the tests, and the base programs kept by hash for the A/B gate."""
