"""Build ``airflow_sm_prefs/data/instances.json``, the instance catalogue ``requires=`` is checked against.

Sources (both AWS's own):

* the EC2 facts of each type (vCPUs, memory, accelerators and their memory, CPU architecture, EFA
  interfaces), from the instance-type reference of AWS's Karpenter provider
  (``aws/karpenter-provider-aws``, ``website/content/en/preview/reference/instance-types.md``), which its
  ``hack/docs/instancetypes_gen`` generates from EC2's ``DescribeInstanceTypes``. A SageMaker ``ml.<type>``
  runs on the EC2 ``<type>``. For types EC2 no longer lists there, the newest version of the file that
  listed them is used (each entry names its commit and date);
* the list of types: botocore's SageMaker model (``TrainingInstanceType``, ``ProcessingInstanceType``).

The GPU architecture of each GPU model is NVIDIA's (``ARCHITECTURES`` below, from NVIDIA's data sheets).

Usage: python tools/build_instance_catalogue.py <karpenter-provider-aws git directory> [output]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

DOC = "website/content/en/preview/reference/instance-types.md"
ARCHITECTURES = {
    "k80": "kepler",
    "m60": "maxwell",
    "v100": "volta",
    "t4": "turing",
    "t4g": "turing",
    "a10g": "ampere",
    "a100": "ampere",
    "l4": "ada-lovelace",
    "l40s": "ada-lovelace",
    "h100": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200": "blackwell",
    "rtx-pro-server-6000": "blackwell",
    "rtx-pro-4500": "blackwell",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True).stdout


def parse(text: str) -> dict[str, dict[str, str]]:
    """EC2 type -> label or resource -> value, from one version of the reference."""
    types: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        heading = re.match(r"^### `([^`]+)`", line)
        if heading:
            current = types.setdefault(heading.group(1), {})
            continue
        row = re.match(r"^\s*\|([^|]+)\|([^|]+)\|\s*$", line)
        if current is not None and row and row.group(1).strip() not in ("Label", "Resource", "--"):
            current[row.group(1).strip()] = row.group(2).strip()
    return types


def facts(raw: dict[str, str]) -> dict[str, object]:
    prefix = "karpenter.k8s.aws/instance-"
    label = {k.removeprefix(prefix): v for k, v in raw.items() if k.startswith(prefix)}
    gpus = int(label.get("gpu-count", 0))
    accelerators = int(label.get("accelerator-count", 0))
    if gpus:
        kind, model, count = "gpu", label.get("gpu-name"), gpus
        memory = round(int(label["gpu-memory"]) / 1024, 2) if label.get("gpu-memory") else None
    elif accelerators:
        name = label.get("accelerator-name", "")
        kind = "trainium" if name.startswith("trainium") else "inferentia" if name.startswith("inferentia") else "other"
        model, count, memory = name, accelerators, None
    else:
        kind, model, count, memory = None, None, 0, None
    return {
        "vcpus": int(label["cpu"]),
        "memory_gib": round(int(label["memory"]) / 1024, 2),
        "cpu_architecture": {"amd64": "x86_64", "arm64": "arm64"}.get(raw.get("kubernetes.io/arch", "")),
        "accelerator": kind,
        "accelerator_model": model,
        "accelerators": count,
        "accelerator_memory_gib": memory,
        "gpu_architecture": ARCHITECTURES.get(model or "") if kind == "gpu" else None,
        "efa_interfaces": int(raw.get("vpc.amazonaws.com/efa", 0)),
    }


def sagemaker_types() -> dict[str, list[str]]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return {
        kind: sorted(model.shape_for(f"{kind.capitalize()}InstanceType").enum) for kind in ("training", "processing")
    }


def main(repo: Path, output: Path) -> None:
    wanted = sagemaker_types()
    every = sorted(set(wanted["training"]) | set(wanted["processing"]))
    commits = _git(repo, "log", "--format=%H %cs", "--", DOC).split("\n")
    found: dict[str, dict[str, object]] = {}
    for line in filter(None, commits):  # newest first
        commit, date = line.split()
        missing = {t.removeprefix("ml.") for t in every if t not in found}
        if not missing:
            break
        versions = parse(_git(repo, "show", f"{commit}:{DOC}"))
        for ec2_type in missing & set(versions):
            found[f"ml.{ec2_type}"] = {
                **facts(versions[ec2_type]),
                "source": f"karpenter-provider-aws@{commit[:12]} ({date})",
            }
    instances = {
        name: {**found[name], "jobs": [kind for kind in ("training", "processing") if name in wanted[kind]]}
        for name in every
        if name in found
    }
    head, head_date = _git(repo, "log", "-1", "--format=%H %cs", "--", DOC).split()
    document = {
        "format": 1,
        "retrieved": head_date,
        "sources": [
            f"EC2 facts: aws/karpenter-provider-aws {DOC} (generated from EC2 DescribeInstanceTypes), newest at "
            f"{head[:12]} ({head_date}); an entry EC2 no longer lists comes from the newest version that listed it",
            "SageMaker instance types: botocore's SageMaker model (TrainingInstanceType, ProcessingInstanceType)",
            "GPU architectures: NVIDIA's data sheets for each GPU model",
        ],
        "not_found": [name for name in every if name not in found],
        "instances": instances,
    }
    # One instance a line: a refresh's diff shows which types changed.
    head_text = json.dumps({k: v for k, v in document.items() if k != "instances"}, indent=1)[:-2]
    lines = [f"  {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}" for name, entry in instances.items()]
    output.write_text(head_text + ',\n "instances": {\n' + ",\n".join(lines) + "\n }\n}\n")
    print(f"{len(instances)} of {len(every)} types; not found: {', '.join(document['not_found']) or 'none'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "airflow_sm_prefs/data/instances.json"))
