"""SageMaker as the client sees it: every call (the hook), a Describe parsed once, what each status means, the
model's preference-list shapes, tags, and the status lines of a task log.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
