"""The Airflow surface: the operators, the listener, the plugin and its Capacity page, links, OpenLineage, the
certification DAG factory, the command line, provider discovery.

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
