"""Preflight: every check judged before a job is created (certification, requirements against the instance
catalogue, cost caps against the price table, quotas, ``finish_by``), applied in one loop by ``runner``.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
