"""Tiny invoicing helpers."""
