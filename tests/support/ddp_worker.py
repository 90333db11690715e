"""Run by torchrun in tests: train a few steps, then save this rank's weights for comparison."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pointmamba.config import load_config  # noqa: E402
from pointmamba.training.trainer import Trainer  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    cfg = load_config(None, sys.argv[2:])
    torch.set_num_threads(1)
    trainer = Trainer(cfg)
    rank = trainer.dist.rank
    out.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.clone() for k, v in trainer.net.state_dict().items()}, out / f"rank{rank}_init.pt")
    trainer.train()
    torch.save({"model": trainer.net.state_dict(), "iteration": trainer.iteration}, out / f"rank{rank}.pt")
    trainer.close()


if __name__ == "__main__":
    main()
