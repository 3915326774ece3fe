"""The capacity ledger's storage: one entry per ended job (``ledger_entry``), written, read, cached, folded and
rebuilt (``ledger``, ``ledger_cache``, ``ledger_compaction``, ``ledger_backfill``), the plan snapshots the pages
read, and the metrics an entry emits. The facts it is built from are in ``facts``; what it tells, in ``analysis``.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
