"""A tiny model and data config shared by the engine tests (seconds per epoch on 2 cores)."""
from __future__ import annotations

from pathlib import Path

TINY_MODEL_SECTION = {"in_channels": 3, "enc_channels": [8, 16], "enc_depths": [1, 1], "dec_channels": [8],
                      "dec_depths": [1], "d_state": 4, "drop_path": 0.0}
"""A tiny model section for tests that build the network directly on 3-channel (coordinate) features."""

TINY_MODEL = [
    "model.enc_channels=[16,16]",
    "model.enc_depths=[1,1]",
    "model.dec_channels=[16]",
    "model.dec_depths=[1]",
    "model.orders=[z,hilbert]",
    "model.d_state=4",
    "model.drop_path=0.0",
]


def tiny_overrides(root: Path, work_dir: Path, epochs: int = 2, **extra: object) -> list[str]:
    """Overrides for a tiny run on the synthetic set written by ``write_synthetic`` into ``root``."""
    items = TINY_MODEL + [
        f"data.root={root}",
        "data.train_names=[SYN00000, SYN00001]",
        "data.val_names=[SYN00002_upper]",
        "data.grid_size=0.6",
        "data.max_points=1200",
        f"data.cache_dir={root / '.cache'}",
        f"work_dir={work_dir}",
        f"train.epochs={epochs}",
        "train.batch_size=2",
        "train.lr=0.01",
        "train.progress=false",
        "train.log_interval=1",
    ]
    items += [f"{k.replace('__', '.')}={v}" for k, v in extra.items()]
    return items


def write_synthetic(root: Path, count: int = 3, vertices: int = 3000) -> Path:
    from pointmamba.data import write_dataset

    if not (root / "train.txt").is_file():
        write_dataset(root, count=count, n_vertices=vertices, seed=0, progress=False)
    return root


def untrained_checkpoint(path: Path, seed: int = 0) -> Path:
    """An untrained tiny 17-class model saved as a checkpoint: predictions are arbitrary but deterministic,
    which is all the tools' plumbing tests need."""
    import torch

    from pointmamba import build_model
    from pointmamba.config import load_config
    from pointmamba.checkpoints.checkpoint import save_checkpoint

    cfg = load_config(None, TINY_MODEL + ["data.grid_size=0.6"])
    torch.manual_seed(seed)
    save_checkpoint({"model": build_model(cfg).state_dict(), "config": {k: v for k, v in cfg.items() if k[0] != "_"}},
                    path)
    return path


def run_training(cfg: dict, resume: bool = False, hooks: list | None = None):
    """Train ``cfg`` to its end (or until a hook raises), always closing the trainer's logs; the trainer."""
    from pointmamba.training.trainer import Trainer

    trainer = Trainer(cfg, resume=resume, hooks=list(hooks or ()))
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer
