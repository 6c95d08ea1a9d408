"""Kernel sources shipped as package data: ``cuda/*.cu`` and ``metal/*.metal``."""
