"""airflow-sm-prefs-devkit: the SageMaker emulator, the local stack and the demo, for development and tests.

Not for production: the runtime (airflow-sm-prefs) never imports it.
"""

from __future__ import annotations

from airflow_sm_prefs.sagemaker.botocore_model import supply_missing_shapes

__version__ = "0.1.0"

# The emulator checks requests against the SageMaker model SageMaker answers by: with a botocore older than
# the preference lists, the runtime's copy of those shapes is loaded first (importing the runtime's root does
# it too; said here, because the emulator depends on it).
supply_missing_shapes()
