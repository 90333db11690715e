"""The in-sample scans at or above 0.80 that the flag marks `lost_end` (the shipped model, session 64's
tools/test.py run on all 187): is a reference tooth missing from the prediction? One line each.

    python docs/results/review_flag/lost_end_insample/check.py > docs/results/review_flag/lost_end_insample/check.txt
"""
import csv, glob, numpy as np
from pointmamba import Segmenter
from pointmamba.data import load_scan
rows = list(csv.DictReader(open('docs/results/review_flag/shipped_all_session64/per_scan.csv')))
fa = [r for r in rows if float(r['miou']) >= 0.8 and r['review'] == 'True' and 'lost_end' in r['findings'].split()]
seg = Segmenter(device='cpu')
for r in fa:
    name = r['name']; pid = name.split('_')[0]
    paths = glob.glob(f'../shared/data/*/{pid}/{name}.obj') + glob.glob(f'../shared/data/*/*/{pid}/{name}.obj')
    scan = load_scan(paths[0])
    out = seg(paths[0])
    ref = set(np.unique(scan.labels).tolist()) - {0}
    pred = set(np.unique(out.labels).tolist()) - {0}
    text = [t for k, t in out.confidence.findings if k == 'lost_end']
    print(name, r['miou'][:5], 'ref-only', sorted(ref - pred), 'pred-only', sorted(pred - ref), '|', text[0][:110] if text else '')
