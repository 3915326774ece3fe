"""What the ledger tells: the per-task report and its verdict, the counterfactual wait, the advice, the capacity
weather, and the plans' advice and use.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
