"""The evidence: what is known of a job once it ended (``JobFacts``) and its projections (the XCom record, the
ledger, metrics), and what the ledger tells (the report, the counterfactual, the advisor, capacity
weather).

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
