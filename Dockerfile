# Airflow 3.3 with this provider installed; used by docker-compose.yaml for every Airflow service and
# for the optional SageMaker emulator.
ARG AIRFLOW_VERSION=3.3.2
FROM apache/airflow:${AIRFLOW_VERSION}-python3.11
ARG AIRFLOW_VERSION
COPY --chown=airflow:0 pyproject.toml README.md LICENSE /opt/airflow-sm-prefs/
COPY --chown=airflow:0 airflow_sm_prefs /opt/airflow-sm-prefs/airflow_sm_prefs
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/airflow-sm-prefs[emulator,s3]"
