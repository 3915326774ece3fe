"""Fixtures more than one module of emulator tests uses."""

from tests.emulator.test_store_faults import store  # noqa: F401 (the emulator's S3 behind a proxy that misbehaves)
