"""Benchmarks: the engine against its peers, database write rates, end to end, memory."""
