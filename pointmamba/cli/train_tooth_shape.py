#!/usr/bin/env python3
"""Train the tooth-shape classifier: each reference tooth of a config's training scans, cropped on its own,
named by position 1..8 from its shape alone (see ``pointmamba/evaluation/tooth_shape.py``).

    tools/train_tooth_shape.py --config FILE --out shape.pth [--epochs 60] [--set key=value ...]

The scans are the config's training split (``data.train_exclude`` left out); its val scans, where the
config names some, are scored after training (accuracy per position, and a confusion table). Only
identity labels train: position-labelled arches (``data.position_label_roots``) count where complete.
Seeded: the same config and seed give the same weights on one machine. Logs to TensorBoard beside --out.

With ``--ridge-share S`` (> 0, the default 0.25) the network also learns "no tooth": crops of bare ridge
(every tooth of a training arch flattened onto the gingiva, patches where teeth were: see
``ridge_crops``), S of an epoch's tooth count drawn from them each epoch; ``infer.tooth_weight`` then lets
the numbering call a tooth drawn on bare ridge gingiva. 0 gives the positions-only classifier of before.
"""
from __future__ import annotations

import argparse

from ._common import add_config_args, parse_args, run_main
from .output_files import check_out_file


def crops_of(dataset, copies: int, progress: bool = True, desc: str = "crops", ridge: bool = False):
    """(crops (T, copies, N, 6), positions (T,), upper (T,)) of every reference tooth of
    the identity-labelled scans in ``dataset``; each copy a different surface sample. With ``ridge``
    also (ridge crops (R, N, 6), upper (R,)): ``copies`` bare-ridge patches per tooth place
    (``ridge_crops``), each from a different flattening."""
    import numpy as np

    from pointmamba.data.mesh import read_mesh
    from pointmamba.evaluation.tooth_shape import ridge_crops, scan_crops

    crops, positions, upper, ridges, ridge_upper = [], [], [], [], []
    for i, aligned, labels, jaw in dataset.identity_arches(progress, desc):
        _, faces = read_mesh(dataset.paths[i])
        if ridge:
            r = np.concatenate([ridge_crops(aligned, faces, labels, seed=k) for k in range(copies)])
            ridges.append(r)
            ridge_upper.append(np.full(len(r), jaw == "upper"))
        per_copy = [scan_crops(aligned, faces, labels, jaw, seed=k) for k in range(copies)]
        if len(per_copy[0][1]) == 0:
            continue
        crops.append(np.stack([c for c, _ in per_copy], axis=1))
        positions.append(per_copy[0][1])
        upper.append(np.full(len(per_copy[0][1]), jaw == "upper"))
    if not crops:
        raise ValueError("no identity-labelled teeth to crop in these scans")
    out = np.concatenate(crops), np.concatenate(positions), np.concatenate(upper)
    return (*out, np.concatenate(ridges), np.concatenate(ridge_upper)) if ridge else out


def augment(crops, rng):
    """A small turn about the occlusal axis (the arch tangent is estimated), a little scale and jitter."""
    import numpy as np

    b = len(crops)
    angle = np.radians(rng.uniform(-12.0, 12.0, size=b))
    c, s = np.cos(angle), np.sin(angle)
    rot = np.zeros((b, 3, 3))
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1.0
    scale = rng.uniform(0.96, 1.04, size=(b, 1, 1))
    xyz = np.einsum("bij,bnj->bni", rot, crops[..., :3]) * scale + rng.normal(0, 0.03, crops[..., :3].shape)
    nrm = np.einsum("bij,bnj->bni", rot, crops[..., 3:])
    return np.concatenate([xyz, nrm], axis=-1).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    parser.add_argument("--out", required=True, help="the tooth-shape model file to write")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--copies", type=int, default=4, help="surface samples per tooth (a new one each epoch)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--ridge-share", type=float, default=0.25,
                        help="bare-ridge crops per epoch, as a share of the teeth (a 'no tooth' output); 0: none")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    args = parse_args(parser)
    out = check_out_file(args.out, [args.config], args.overwrite)
    if not 1 <= args.epochs <= 10_000 or not 1 <= args.copies <= 64 or not 8 <= args.width <= 1024:
        raise ValueError("--epochs 1..10000, --copies 1..64 and --width 8..1024")
    if not 0.0 <= args.ridge_share <= 4.0:
        raise ValueError(f"--ridge-share must be in [0, 4], got {args.ridge_share}")
    ridge = args.ridge_share > 0

    import numpy as np
    import torch
    from tqdm import tqdm

    from pointmamba.config import load_config
    from pointmamba.evaluation.tooth_shape import save_shape_model
    from pointmamba.models.tooth_shape import ToothShapeNet
    from pointmamba.data.dataset import data_roots, split_path
    from pointmamba.training.data_builders import build_dataset

    cfg = load_config(args.config, args.overrides)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train = build_dataset(cfg, "train", train=False)
    crops, positions, upper, *ridge_train = crops_of(train, args.copies, desc="train crops", ridge=ridge)
    d = cfg["data"]
    has_val = bool(d["val_names"]) or (d["val_split"] != "all" and split_path(data_roots(d["root"]), d["val_split"],
                                                                             d["split_dir"]).is_file())
    val = build_dataset(cfg, "val", train=False) if has_val else None
    if val is None:
        print("no val scans named (data.val_names or a val split file): nothing is scored after training")
    val_data = crops_of(val, 1, desc="val crops", ridge=ridge) if val is not None else None
    target = positions - 1
    model = ToothShapeNet(width=args.width, no_tooth=ridge)
    n_ridge = int(round(args.ridge_share * len(target))) if ridge else 0
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    steps = args.epochs * int(np.ceil((len(target) + n_ridge) / args.batch_size))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps, pct_start=0.1)
    # rare positions (third molars) weigh up by 1/sqrt of their frequency, as the segmentation loss does
    freq = np.bincount(target, minlength=8).astype(np.float64)
    if ridge:
        freq = np.append(freq, n_ridge)  # the "no tooth" class, as often as it is drawn in an epoch
    weight = torch.tensor(np.where(freq > 0, (freq.sum() / np.maximum(freq, 1)) ** 0.5, 0.0), dtype=torch.float32)
    weight = weight / weight[freq > 0].mean()
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(out.parent / f"{out.stem}_tb"))
    step = 0
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(target))
        copy = rng.integers(0, args.copies, size=len(target))
        pool_x, pool_upper, pool_target = crops[np.arange(len(target)), copy], upper, target
        if ridge:  # drawn only with a "no tooth" output, so the random stream of --ridge-share 0 is as before
            pick = rng.choice(len(ridge_train[0]), size=n_ridge, replace=n_ridge > len(ridge_train[0]))
            pool_x = np.concatenate([pool_x, ridge_train[0][pick]])
            pool_upper = np.concatenate([upper, ridge_train[1][pick]])
            pool_target = np.concatenate([target, np.full(n_ridge, 8)])
            order = rng.permutation(len(pool_target))
        total = 0.0
        for start in tqdm(range(0, len(order), args.batch_size), desc=f"epoch {epoch + 1}/{args.epochs}", leave=False):
            idx = order[start:start + args.batch_size]
            x = torch.from_numpy(augment(pool_x[idx], rng))
            logits = model(x, torch.from_numpy(pool_upper[idx].astype(np.float32)))
            loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(pool_target[idx]), weight=weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
            step += 1
        writer.add_scalar("shape/train_loss", total / len(order), epoch + 1)
    model.eval()
    meta = {"config": str(args.config), "overrides": list(args.overrides), "seed": seed, "epochs": args.epochs,
            "train_teeth": int(len(target)), "train_scans": len(train)}
    if val_data is not None:
        from pointmamba.evaluation.tooth_shape import crop_probabilities

        def by_jaw(x, up):  # (positions, p(tooth)) of crops x, lower jaws first, as truth is ordered
            parts = [crop_probabilities(model, x[up == u], "upper" if u else "lower") for u in (False, True)]
            return np.concatenate([p for p, _ in parts]), np.concatenate([t for _, t in parts])

        v_crops, v_pos, v_upper, *v_ridge = val_data
        probs, tooth = by_jaw(v_crops[:, 0], v_upper)
        truth = np.concatenate([v_pos[v_upper == u] for u in (False, True)])
        pred = probs.argmax(1) + 1
        acc = float((pred == truth).mean())
        meta["val_accuracy"] = acc
        meta["val_teeth"] = int(len(truth))
        print(f"val: {len(truth)} teeth, accuracy {acc:.3f}")
        print("position: " + "  ".join(f"{p}: {np.mean(pred[truth == p] == p):.2f} ({(truth == p).sum()})"
                                       for p in range(1, 9) if (truth == p).any()))
        confusion = np.zeros((8, 8), dtype=int)
        np.add.at(confusion, (truth - 1, pred - 1), 1)
        print("confusion (rows: reference 1..8, columns: predicted 1..8):")
        for p in range(8):
            print(f"  {p + 1}: " + " ".join(f"{c:4d}" for c in confusion[p]))
        writer.add_scalar("shape/val_accuracy", acc, args.epochs)
        if ridge:
            teeth_ok = float((tooth > 0.5).mean())
            ridge_ok = float((by_jaw(*v_ridge)[1] < 0.5).mean())
            meta.update(val_teeth_called_teeth=teeth_ok, val_ridge_called_ridge=ridge_ok, val_ridge=len(v_ridge[0]))
            print(f"no tooth: {teeth_ok:.3f} of val teeth called teeth, {ridge_ok:.3f} of {len(v_ridge[0])} "
                  "bare-ridge crops called no tooth")
    writer.close()
    save_shape_model(out, model, meta)
    print(f"wrote {out}")


def cli() -> None:
    """Entry point of ``pointmamba-train-tooth-shape``."""
    run_main(main)


if __name__ == "__main__":
    cli()
