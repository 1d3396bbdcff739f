"""Helpers of the tierfs benchmark driver (tools/bench/run)."""
