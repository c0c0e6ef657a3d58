"""Planted targets: code with one known bug each (or none), imported by name as check targets."""
