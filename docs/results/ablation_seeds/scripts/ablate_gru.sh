cd "$(git rev-parse --show-toplevel)"
export OMP_NUM_THREADS=1
SET='train.epochs=10 model.enc_channels=[16,32,64,128] model.enc_depths=[1,1,1,1] model.dec_channels=[16,32,64] data.max_points=3000 train.val_interval=1 train.progress=false'
C=configs/ablation
while kill -0 24652 2>/dev/null; do sleep 10; done
.venv/bin/python -m pointmamba.cli.ablate $C/gru.yaml $C/sin_gru.yaml --seeds 0 --out work_dirs/ablation_seeds --set $SET
.venv/bin/python -m pointmamba.cli.ablate $C/gru.yaml $C/sin_gru.yaml --seeds 1 --out work_dirs/ablation_seeds --set $SET
