"""The SageMaker shapes the project sends and reads, for a botocore whose model predates them.

``InstancePreferences`` (training and processing, with the per-entry ``TrainingPlanArns``) and the
``SelectedInstanceType``/``SelectedInstanceCount`` that Describe returns first appear in botocore 1.43.90.
Platforms pin older ones (MWAA 3.3.1: 1.43.56; 3.2.1: 1.42.84; 3.1.6: 1.41.5). There, botocore refuses a
list before sending it, and drops the ``Selected*`` members from Describe's answer.

The shapes ship as ``data/botocore/sagemaker/<api version>/service-2.sdk-extras.json``, written from the API
reference, and reach botocore its own documented way: a folder on ``AWS_DATA_PATH``, whose ``sdk-extras``
botocore merges into the model it loads. The variable is read by every botocore session when it is made,
so boto3, aiobotocore and the amazon provider's hooks all see the shapes in every process that imported
this package (it does so on import, before any client of ours exists). One loader does not read it: the
amazon provider shares a single ``Loader`` among its async sessions (to save the triggerer's memory), made
when its ``base_aws`` module is imported; :func:`extend_loader` gives it the folder too. Both happen only
where the installed model lacks the shapes: a newer model is never patched.
"""

from __future__ import annotations

import functools
import os
from importlib import metadata
from typing import Any

from packaging.version import InvalidVersion, Version

from airflow_sm_prefs.storage.paths import SHIPPED_DATA

# The first botocore whose SageMaker model has InstancePreferences and Selected* (its changelog, 1.43.90).
FIRST_BOTOCORE_WITH_PREFERENCES = (1, 43, 90)
EXTRAS_FOLDER = SHIPPED_DATA / "botocore"


@functools.cache
def installed_botocore() -> Version | None:
    """The installed botocore's version, from its metadata: importing botocore would cost every DAG parse."""
    try:
        return Version(metadata.version("botocore"))
    except (metadata.PackageNotFoundError, InvalidVersion):
        return None


def model_needs_extras(version: Version | None) -> bool:
    return version is not None and version.release < FIRST_BOTOCORE_WITH_PREFERENCES


def supply_missing_shapes(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Put the extras on ``AWS_DATA_PATH`` when the installed botocore lacks the shapes; whether it did."""
    if not model_needs_extras(installed_botocore()):
        return False
    folder = str(EXTRAS_FOLDER)
    paths = [path for path in environ.get("AWS_DATA_PATH", "").split(os.pathsep) if path]
    if folder not in paths:
        environ["AWS_DATA_PATH"] = os.pathsep.join([folder, *paths])
    return True


def extend_loader(loader: Any) -> bool:
    """Add the extras' folder to a botocore ``Loader`` made before ``AWS_DATA_PATH`` was set; whether it did."""
    if not model_needs_extras(installed_botocore()):
        return False
    paths = getattr(loader, "search_paths", None)
    if not isinstance(paths, list):
        return False
    if str(EXTRAS_FOLDER) not in paths:
        paths.insert(0, str(EXTRAS_FOLDER))
    return True


def extend_provider_loader() -> bool:
    """The amazon provider's loader shared by its async sessions (``base_aws._loader``, private to it, so
    looked up defensively: a provider without it makes its sessions the usual way, which read the variable)."""
    from airflow.providers.amazon.aws.hooks import base_aws

    return extend_loader(getattr(base_aws, "_loader", None))
