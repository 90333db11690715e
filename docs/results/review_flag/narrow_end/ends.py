"""Each side's last numbered tooth under today's defaults (session 70): its review width (width_mm) against its
number's textbook width, and the share of the reference tooth there the prediction left as gingiva:
python ends.py CACHE > ends_X.txt (columns: scan, tooth, width share, gingiva share, reference vertices, flagged, findings)."""
import glob, sys, numpy as np
from pathlib import Path
from pointmamba.research.numbering_replay import replay_file
from pointmamba.data.arch import TEXTBOOK_WIDTH_MM
cache = sys.argv[1]; ex = {'numbering_class_prior': 0.5} if cache.rstrip('/').endswith('B') else {}
for p in sorted(glob.glob(cache + '/*.npz')):
    if '__' in p: continue
    r = replay_file(Path(p), ex, review=True)
    for q in sorted({t.fdi // 10 for t in r.teeth}):
        side = [t for t in r.teeth if t.fdi // 10 == q]
        last = max(side, key=lambda t: t.fdi)
        if last.width_mm is None: continue
        w = last.width_mm / TEXTBOOK_WIDTH_MM[r.jaw][last.fdi % 10 - 1]
        m = r.reference == last.fdi
        gum = (r.fdi[m] == 0).mean() if m.any() else float('nan')
        print(Path(p).stem, last.fdi, round(w, 2), round(gum, 2), int(m.sum()), r.review, '_'.join(r.findings) if not isinstance(r.findings, str) else r.findings.replace(' ', '_'))
