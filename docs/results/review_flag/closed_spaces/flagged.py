"""Which single-tooth removals the review flag catches: those that change another tooth's number, and the rest.

    python docs/results/review_flag/closed_spaces/flagged.py CACHE REMOVALS_CSV [--set KEY=VALUE ...]

CACHE: a numbering replay cache with removals (``numbering_replay cache --removals [--removal-mode close]``);
REMOVALS_CSV: the replay's removals.csv of it (which removals change another tooth). Each removal is numbered
and reviewed as tools/predict.py does it (today's defaults, the infer options given with --set), and one line
printed per removal that changes another tooth: the scan, the tooth removed, the teeth changed (reference
number: intact -> without), the review and its findings' kinds. Then the counts, and how often each kind fires
on the removals that change another tooth and on those that do not. A closed space is made by cutting the
gingiva of the closed wedge out (``removal_check --mode close``), which can leave the mesh in two large parts:
the ``parts`` finding that follows is the removal's doing, so the counts are given with and without it.
"""
from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from pathlib import Path

import numpy as np

from pointmamba.evaluation.removal_check import tooth_numbers
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file


def reviewed(path: Path, overrides: dict) -> tuple[np.ndarray, np.ndarray, bool, list[str]]:
    """(predicted FDI, reference FDI, review flag, findings' kinds) of one cached scan (``replay_file``)."""
    r = replay_file(path, overrides, review=True)
    return r.fdi, r.reference, bool(r.review), sorted(r.findings.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache")
    parser.add_argument("removals_csv")
    parser.add_argument("--set", dest="sets", nargs="*", default=[])
    args = parser.parse_args()
    overrides = {k.removeprefix("infer."): json.loads(v) for k, v in (s.split("=", 1) for s in args.sets)}
    cache = Path(args.cache)
    rows = list(csv.DictReader(open(args.removals_csv)))
    bases: dict[str, dict[int, int]] = {}
    counts = Counter()
    beyond_parts = Counter()  # flagged by a finding other than `parts`
    kinds = {True: Counter(), False: Counter()}
    for r in rows:
        scan = r["scan"]
        if scan not in bases:
            fdi, ref, _, _ = reviewed(cache / f"{scan}.npz", overrides)
            bases[scan] = tooth_numbers(ref, fdi)
        fdi, ref, review, found = reviewed(cache / f"{scan}{REMOVAL_MARK}{r['removed']}.npz", overrides)
        after = tooth_numbers(ref, fdi)
        changed = [t for t, n in after.items() if n != bases[scan][t]]
        hit = bool(changed)
        counts[hit, review] += 1
        beyond_parts[hit] += bool(set(found) - {"parts"})
        kinds[hit].update(found)
        if hit:
            moves = " ".join(f"{t}:{bases[scan][t]}->{after[t]}" for t in changed)
            print(f"{scan} without {r['removed']}: {moves} | {'FLAGGED' if review else 'not flagged'} {' '.join(found)}",
                  flush=True)
    changing = counts[True, True] + counts[True, False]
    other = counts[False, True] + counts[False, False]
    print(f"\nremovals {len(rows)}; changing another tooth {changing}, flagged {counts[True, True]} "
          f"({beyond_parts[True]} by a finding other than parts); changing none {other}, flagged "
          f"{counts[False, True]} ({beyond_parts[False]})")
    for hit in (True, False):
        print(("changing" if hit else "not changing") + ": " + ", ".join(f"{k} {n}" for k, n in kinds[hit].most_common()))


if __name__ == "__main__":
    main()
