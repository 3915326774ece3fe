"""The request and its rules: the preference lists, the kind table (training, processing), the job request built
from ``config`` and the friendly arguments.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
