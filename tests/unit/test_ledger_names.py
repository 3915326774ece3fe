"""A job's own object in the ledger is named once (``job_file_name``) and read back by its inverse."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.evidence import ledger


@pytest.mark.parametrize(
    ("name", "region"),
    [
        ("nightly-fine-tune-3f2a", "us-east-1"),
        ("nightly-fine-tune-3f2a", "ap-southeast-2"),
        ("us-east-1", "eu-west-1"),  # a name that looks like a Region
        ("a.b%c d", "us-gov-west-1"),  # what a backfill of a hand-made entry might hold
        ("nightly", None),  # entries written before the Region was in the name
    ],
)
def test_a_job_file_name_reads_back_as_its_region_and_name(name, region):
    entry = {"job_name": name, "region": region} if region else {"job_name": name}
    assert ledger.job_of_file_name(ledger.job_file_name(entry)) == (region, name)
