"""The flattened removals that change another tooth's number: into what, and does the review flag say so?

For each complete val arch of the replay caches (the held-out pairs, today's defaults), each removal that changes
another tooth is sorted by what happened to that tooth: dropped (left as gingiva), renumbered (another tooth
number), or a tooth that was gingiva before and is numbered now; and whether the scan without the tooth is flagged
for review (`tools/predict.py`'s flag). The removals that change nothing are counted flagged or not, so that a
flag raised on every removal would show. Split B's cache was cut before `infer.numbering_class_prior` became 0.5 and
stores the old value, so it is replayed with it set.

    python docs/results/review_flag/removal_flags.py > docs/results/review_flag/removal_flags.txt
"""
import warnings
from collections import Counter
from pathlib import Path

from pointmamba.evaluation.removal_check import tooth_numbers
from pointmamba.research.numbering_replay import REMOVAL_MARK, replay_file

CACHES = {"A": (Path("work_dirs/replay/A"), {}), "B": (Path("work_dirs/replay/B"), {"numbering_class_prior": 0.5})}


def kind(before: int, after: int) -> str:
    if after == 0:
        return "dropped"
    if before == 0:
        return "numbered"
    return "renumbered"


def main() -> None:
    warnings.simplefilter("ignore")
    for split, (root, overrides) in CACHES.items():
        counts: Counter = Counter()
        removals = changing = quiet_flagged = 0
        quiet_kinds: Counter = Counter()
        lines = []
        for whole in sorted(p for p in root.glob("*.npz") if REMOVAL_MARK not in p.stem):
            parts = sorted(root.glob(f"{whole.stem}{REMOVAL_MARK}*.npz"))
            if not parts:
                continue
            base = replay_file(whole, overrides)
            numbers = tooth_numbers(base.reference, base.fdi)
            for part in parts:
                removed = int(part.stem.split(REMOVAL_MARK)[1])
                after = replay_file(part, overrides, review=True)
                now = tooth_numbers(after.reference, after.fdi)
                changed = {t: (numbers[t], now.get(t, 0)) for t in numbers if t != removed and numbers[t] != now.get(t, 0)}
                removals += 1
                if not changed:
                    quiet_flagged += bool(after.review)
                    quiet_kinds.update((after.findings or "").split())
                    continue
                changing += 1
                what = "+".join(sorted({kind(b, a) for b, a in changed.values()}))
                counts[(what, bool(after.review))] += 1
                lines.append(f"  {whole.stem} without {removed}: "
                             + ", ".join(f"{t} {b} -> {a}" for t, (b, a) in changed.items())
                             + f"; {'flagged' if after.review else 'NOT flagged'} ({after.findings or '-'})")
        print(f"split {split}: {changing} of {removals} removals change another tooth; of the other "
              f"{removals - changing}, {quiet_flagged} are flagged, with these findings: "
              + ", ".join(f"{k} {n}" for k, n in quiet_kinds.most_common()))
        for (what, flagged), n in sorted(counts.items()):
            print(f"  {what}, {'flagged' if flagged else 'not flagged'}: {n}")
        print("\n".join(lines))
        print()


if __name__ == "__main__":
    main()
