from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import jsonschema
from packaging.utils import canonicalize_name

from airflow_sm_prefs.surface.provider_info import get_provider_info


def test_provider_info_matches_airflow_schema_and_distribution_name():
    schema = json.loads(resources.files("airflow").joinpath("provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == canonicalize_name("airflow-sm-prefs")


def test_importing_the_package_does_not_import_boto3_or_operators():
    code = (
        "import sys, airflow_sm_prefs; "
        "heavy = ('boto3', 'botocore', 'aiobotocore', 'airflow_sm_prefs.surface.operators'); "
        "print(any(m in sys.modules for m in heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_listener_plugin_is_registered_where_airflow_always_looks():
    from importlib.metadata import entry_points

    from airflow_sm_prefs.surface import listener

    (entry,) = [e for e in entry_points(group="airflow.plugins") if e.name == "sm_prefs"]
    plugin = entry.load()
    assert plugin.listeners == [listener]
    assert {"on_task_instance_failed", "on_task_instance_success"} <= set(dir(listener))


def test_loading_the_plugin_imports_no_web_framework():
    """Every Airflow process loads the plugin (workers for its listener); only the API server serves pages."""
    import subprocess
    import sys

    code = "import sys, airflow_sm_prefs.surface.plugin; print('fastapi' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"
