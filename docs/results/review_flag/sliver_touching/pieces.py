"""Each region the unnumbered mend numbers (session 69's defaults against `mend_unnumbered` 0), with its area, gum probability,
height against the arch's teeth and what the reference has there: python pieces.py CACHE [all] > pieces_X.csv (`all`:
the removals too). Session 70."""
import sys, glob, numpy as np
from pathlib import Path
from pointmamba.research.numbering_replay import replay_file
from pointmamba.data.mesh import face_areas
S69 = {'mend_unnumbered_area': 0.0, 'mend_unnumbered_touching': False}  # session 69's mend
cache = sys.argv[1]; extra = dict(numbering_class_prior=0.5) if cache.rstrip('/').endswith('B') else {}
print("scan,number,nv,area,ref_tooth,ref_same,gum,zrel,zmax_rel,last,on_miou_delta")
def miou(f, ref):
    cs = np.union1d(np.unique(f), np.unique(ref)); return np.mean([((f==c)&(ref==c)).sum()/((f==c)|(ref==c)).sum() for c in cs])
for p in sorted(glob.glob(cache + '/*.npz')):
    if '__' in p and len(sys.argv) < 3: continue
    on = replay_file(Path(p), {**extra, **S69}); off = replay_file(Path(p), {**extra, 'mend_unnumbered': 0})
    if (on.fdi == off.fdi).all(): continue
    z = np.load(p); P = z['probs']; X = z['aligned']; F = z['faces']
    va = np.zeros(len(X)); np.add.at(va, F.ravel(), np.repeat(face_areas(X, F) / 3, 3))
    d = miou(on.fdi, on.reference) - miou(off.fdi, off.reference)
    for t in np.unique(on.fdi[on.fdi != off.fdi]):
        m = (on.fdi == t) & (off.fdi != t)
        if t == 0: 
            print(f"{Path(p).stem},lost{int(np.unique(off.fdi[m])[0])},{m.sum()},,,,,,,,{d:.3f}"); continue
        ref = on.reference[m]
        teeth_z = X[on.fdi > 0, 2]
        zr = np.median(X[m, 2]) - np.median(teeth_z); zx = X[m, 2].max() - np.percentile(teeth_z, 95)
        same_side = on.fdi[(on.fdi // 10) == t // 10]
        last = int(t % 10 == same_side.max() % 10) if len(same_side) else 1
        print(f"{Path(p).stem},{t},{m.sum()},{va[m].sum():.1f},{(ref>0).mean():.2f},{(ref==t).mean():.2f},{P[m,0].mean():.2f},{zr:.2f},{zx:.2f},{last},{d:.3f}")
