"""Test oracles: retired implementations kept to check their replacements against."""
