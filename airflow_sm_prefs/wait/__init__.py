"""The wait: the deferred trigger and the triggerer's shared watcher and log follower, the blocking wait in a
worker slot, the polling rule and how a wait ended.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
