"""Benchmarks: scripts that measure and print. Never part of the tests' assertions."""
