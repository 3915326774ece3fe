"""What is known of one ended job (``JobFacts``), the record the task returns from it, why it failed, and how busy
its GPUs were.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
