"""The Price List API and Service Quotas on the emulator's endpoint, through unmodified boto3 clients, and
``airflow-sm-prefs prices refresh`` reading the first into the price table."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from airflow_sm_prefs.reference import price_list, prices
from airflow_sm_prefs.surface import cli
from sm_prefs_devkit.emulator.scenario import parse_faults
from tests.helpers import boto_client

pytestmark = pytest.mark.emulator


def test_get_products_answers_the_scenarios_prices_in_the_price_lists_shape(start_emulator):
    server = start_emulator("nightly-weather")
    client = boto_client(server.endpoint_url, service="pricing")
    retrieved = price_list.retrieve(client, ["us-east-1"])
    assert retrieved.prices["us-east-1"]["training"]["ml.p4d.24xlarge"] == "40"
    assert retrieved.prices["us-east-1"]["processing"]["ml.c5.xlarge"] == "0.25"
    assert retrieved.skipped == 0 and not retrieved.conflicts
    item = json.loads(
        client.get_products(
            ServiceCode="AmazonSageMaker",
            Filters=[{"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.p5.48xlarge"}],
        )["PriceList"][0]
    )
    assert item["product"]["attributes"]["usagetype"].endswith("-Train:ml.p5.48xlarge")
    (offer,) = item["terms"]["OnDemand"].values()
    (dimension,) = offer["priceDimensions"].values()
    assert (dimension["unit"], dimension["pricePerUnit"]) == ("Hrs", {"USD": "100"})


def test_get_products_pages_and_refuses_a_token_of_another_query(start_emulator):
    server = start_emulator("nightly-weather")
    client = boto_client(server.endpoint_url, service="pricing")
    pages = list(client.get_paginator("get_products").paginate(ServiceCode="AmazonSageMaker", MaxResults=3))
    assert [len(page["PriceList"]) for page in pages] == [3, 3, 3, 2]
    with pytest.raises(ClientError, match="InvalidParameterException"):
        client.get_products(
            ServiceCode="AmazonSageMaker",
            NextToken=pages[0]["NextToken"],
            Filters=[{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"}],
        )
    with pytest.raises(ClientError, match="NotFoundException"):
        client.get_products(ServiceCode="AmazonEC2")
    with pytest.raises(ClientError, match="ValidationException"):
        boto_client(server.endpoint_url, validate=False, service="pricing").get_products(
            ServiceCode="AmazonSageMaker", MaxResults=0
        )


def test_service_quotas_lists_and_gets_the_scenarios_quotas_by_name(start_emulator):
    server = start_emulator("quota-short")
    client = boto_client(server.endpoint_url, service="service-quotas")
    quotas = [
        quota
        for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker", MaxResults=1)
        for quota in page["Quotas"]
    ]
    assert {(q["QuotaName"], q["Value"]) for q in quotas} == {
        ("ml.p4d.24xlarge for training job usage", 1.0),
        ("ml.p4d.24xlarge for processing job usage", 1.0),
    }
    got = client.get_service_quota(ServiceCode="sagemaker", QuotaCode=quotas[0]["QuotaCode"])["Quota"]
    assert got == quotas[0]
    with pytest.raises(ClientError, match="NoSuchResourceException"):
        client.get_service_quota(ServiceCode="sagemaker", QuotaCode="L-12345678")
    with pytest.raises(ClientError, match="NoSuchResourceException"):
        client.list_service_quotas(ServiceCode="ec2")


def test_a_default_quota_is_served_for_every_instance_type_of_the_model(start_emulator, tmp_path):
    scenario = tmp_path / "default-quota.yaml"
    scenario.write_text("name: default-quota\ndefault_quota: 4\nquotas: {ml.p5.48xlarge: 0}\n")
    server = start_emulator(str(scenario))
    client = boto_client(server.endpoint_url, service="service-quotas")
    quotas = {
        q["QuotaName"]: q["Value"]
        for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker")
        for q in page["Quotas"]
    }
    assert quotas["ml.p5.48xlarge for training job usage"] == 0.0
    assert quotas["ml.g5.xlarge for processing job usage"] == 4.0
    assert len(quotas) > 100


def test_the_deny_fault_refuses_quota_reads_as_iam_would(start_emulator):
    server = start_emulator("quota-short")
    server.emulator.faults = parse_faults({"deny": ["ListServiceQuotas"]})
    with pytest.raises(ClientError, match="AccessDeniedException") as denied:
        boto_client(server.endpoint_url, service="service-quotas").list_service_quotas(ServiceCode="sagemaker")
    assert "service-quotas:ListServiceQuotas" in str(denied.value)


def test_prices_refresh_writes_a_table_with_its_source_and_date(start_emulator, aws_connection, tmp_path, capsys):
    server = start_emulator("nightly-weather")
    conn_id = aws_connection(server)
    output = tmp_path / "prices.json"
    output.write_text(json.dumps(prices.to_json({"eu-west-1": {"training": {"ml.m5.xlarge": "0.3"}}}, "mine", "x")))
    assert cli.main(["prices", "refresh", "--aws-conn-id", conn_id, "--output", str(output)]) == 0
    assert "11 price(s) for us-east-1 written" in capsys.readouterr().out
    table = prices.read_file(output)
    assert table.hourly("us-east-1", "training", "ml.p5.48xlarge").usd == 100.0
    assert table.hourly("eu-west-1", "training", "ml.m5.xlarge").usd == 0.3  # other Regions are kept
    (source,) = table.sources
    assert source.source.startswith("AWS Price List Query API") and server.endpoint_url in source.source
    assert source.retrieved is not None


def test_prices_refresh_fails_in_one_line_and_writes_nothing_when_the_api_refuses(
    start_emulator, aws_connection, tmp_path, capsys
):
    server = start_emulator("nightly-weather")
    server.emulator.faults = parse_faults({"deny": ["GetProducts"]})
    output = tmp_path / "prices.json"
    assert cli.main(["prices", "refresh", "--aws-conn-id", aws_connection(server), "--output", str(output)]) == 2
    assert "AccessDeniedException" in capsys.readouterr().err and not output.exists()
