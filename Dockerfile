# Airflow 3.3 with this provider installed; used by docker-compose.yaml for every Airflow service and
# for the optional SageMaker emulator.
ARG AIRFLOW_VERSION=3.3.2
FROM apache/airflow:${AIRFLOW_VERSION}-python3.11
ARG AIRFLOW_VERSION
COPY --chown=airflow:0 pyproject.toml README.md LICENSE /opt/airflow-sm-prefs/
COPY --chown=airflow:0 airflow_sm_prefs /opt/airflow-sm-prefs/airflow_sm_prefs
# The development kit for the emulator service (devkit/LICENSE is a link to the root's, so the root copy is used).
COPY --chown=airflow:0 devkit/pyproject.toml devkit/README.md /opt/airflow-sm-prefs/devkit/
COPY --chown=airflow:0 LICENSE /opt/airflow-sm-prefs/devkit/LICENSE
COPY --chown=airflow:0 devkit/sm_prefs_devkit /opt/airflow-sm-prefs/devkit/sm_prefs_devkit
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/airflow-sm-prefs[s3]" /opt/airflow-sm-prefs/devkit
