"""The task's life with its job: one state machine (``task_life``), the claim and the submission, what the task
leaves behind, when a wait must end, and the words that end it.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
