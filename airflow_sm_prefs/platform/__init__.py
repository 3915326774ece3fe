"""The ground floor every layer may use: what the running Airflow line offers (airflow_lines), a trigger's
requests to Airflow's supervisor (supervisor_calls), Airflow's secrets masker over what a job says (redaction),
and how a duration reads (formatting).

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""
