"""Captured model calls: the record type and the per-episode JSONL store."""

from __future__ import annotations

from clawgym_env.capture.records import CallRecord, TokenSource
from clawgym_env.capture.routing import RoutedExperts
from clawgym_env.capture.store import CaptureWriter, read_capture

__all__ = ["CallRecord", "CaptureWriter", "RoutedExperts", "TokenSource", "read_capture"]
