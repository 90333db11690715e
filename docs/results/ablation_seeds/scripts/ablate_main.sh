cd "$(git rev-parse --show-toplevel)"
export OMP_NUM_THREADS=1
SET='train.epochs=10 model.enc_channels=[16,32,64,128] model.enc_depths=[1,1,1,1] model.dec_channels=[16,32,64] data.max_points=3000 train.val_interval=1 train.progress=false'
C=configs/ablation
.venv/bin/python -m pointmamba.cli.ablate $C/cpe.yaml $C/cpe_relpos_naive.yaml $C/cpe_relpos_fixed.yaml $C/cpe_relpos_quantile.yaml $C/cpe_relpos_warmup.yaml $C/relpos_abs.yaml $C/spherical.yaml $C/sinusoidal.yaml $C/logical.yaml $C/sin_logical.yaml --seeds 0 1 2 --jobs 1 --out work_dirs/ablation_seeds --set $SET
