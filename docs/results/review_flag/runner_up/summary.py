"""The four runner-up files summed up (``runner_up.py``'s lines): python docs/results/review_flag/runner_up/summary.py"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


print("| cache | scans | wrong teeth | runner-up right | of them in flagged scans | below 0.80: mIoU -> runner-ups taken "
      "| flagged: mIoU -> runner-ups taken | kept (>= 0.80) -> runner-ups taken | flagged with a wrong tooth: mIoU, "
      "runner-ups of the wrong teeth, the side action |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ("A_whole", "B_whole", "A_close", "B_close"):
    rows = [line.split() for line in (HERE / f"{name}.txt").read_text().splitlines()]
    miou, flagged = [float(r[1]) for r in rows], [r[2] == "True" for r in rows]
    wrong, right, taken = [int(r[3]) for r in rows], [int(r[4]) for r in rows], [float(r[5]) for r in rows]
    side = [float(r[7]) for r in rows]
    below = [i for i, m in enumerate(miou) if m < 0.8]
    hit = [i for i, f in enumerate(flagged) if f and wrong[i]]
    flag = [i for i, f in enumerate(flagged) if f]
    print(f"| {name} | {len(rows)} | {sum(wrong)} | {sum(right)} ({sum(right) / max(sum(wrong), 1):.0%}) | "
          f"{sum(right[i] for i in flag)} of {sum(wrong[i] for i in flag)} | "
          f"{mean([miou[i] for i in below]):.3f} -> {mean([taken[i] for i in below]):.3f} ({len(below)}) | "
          f"{mean([miou[i] for i in flag]):.3f} -> {mean([taken[i] for i in flag]):.3f} ({len(flag)}) | "
          f"{sum(m >= 0.8 for m in miou)} -> {sum(t >= 0.8 for t in taken)} | "
          f"{mean([miou[i] for i in hit]):.3f}, {mean([taken[i] for i in hit]):.3f}, {mean([side[i] for i in hit]):.3f} ({len(hit)}) |")
