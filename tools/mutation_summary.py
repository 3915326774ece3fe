"""Summarise a `mutmut run`: mutants per module and outcome, and the surviving share; exit 1 above the bound.

A mutant counts as caught when a test failed (killed) or ran out of time (the mutation made the code hang).
It counts against us when it survived or when no test ran the mutated function at all.

    python tools/mutation_summary.py [--max-surviving 0.10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter, defaultdict

CAUGHT = {"killed", "timeout"}
MISSED = {"survived", "no tests"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-surviving", type=float, default=0.10)
    parser.add_argument("--mutmut", default="mutmut")
    bound = parser.parse_args()
    listing = subprocess.run(
        [bound.mutmut, "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for line in listing.splitlines():
        name, _, outcome = line.strip().rpartition(": ")
        if not name.startswith("airflow_sm_prefs."):
            continue
        by_module[".".join(name.split(".")[1:-1])][outcome] += 1  # <package>.<subpackage>.<module>.<mutant>
    total: Counter[str] = sum(by_module.values(), Counter())
    print(f"{'module':<24} {'mutants':>8} {'caught':>7} {'survived':>9} {'no tests':>9}")
    for module, counts in sorted(by_module.items()):
        print(
            f"{module:<24} {sum(counts.values()):>8} {sum(counts[o] for o in CAUGHT):>7} "
            f"{counts['survived']:>9} {counts['no tests']:>9}"
        )
    judged = sum(total[o] for o in CAUGHT | MISSED)
    missed = sum(total[o] for o in MISSED)
    if not judged:
        print("no mutants were judged: run `mutmut run` first", file=sys.stderr)
        return 1
    share = missed / judged
    print(f"surviving: {missed} of {judged} ({share:.1%}); the bound is {bound.max_surviving:.0%}")
    return 0 if share <= bound.max_surviving else 1


if __name__ == "__main__":
    sys.exit(main())
