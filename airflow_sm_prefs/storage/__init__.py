"""Where shared state lives: ``[sm_prefs] storage`` as object storage, default locations, and users' files read
safely.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
