cd "$(git rev-parse --show-toplevel)"
.venv/bin/python -m pointmamba.cli.ablate 'configs/ablation/*.yaml' --seeds 0 1 2 --out work_dirs/ablation_seeds --no-train --set train.epochs=10 "model.enc_channels=[16,32,64,128]" "model.enc_depths=[1,1,1,1]" "model.dec_channels=[16,32,64]" data.max_points=3000 train.val_interval=1 train.progress=false
