"""The tiny seeded run behind the behaviour-preservation fixtures (``tests/fixtures/reference_*``).

``python tests/support/reference_run.py`` (re)writes them; ``tests/test_reference.py`` repeats the run and
compares. The fixtures were recorded from the code before the issue-16 cleanup, so the test checks that a
refactor changes neither the trained weights (bit for bit) nor what an old checkpoint predicts.

Bits depend on the CPU as well as the code: the same code gave other bits on an AMD EPYC with AVX-512
than on the machine that recorded the fixtures (torch dispatches kernels by CPU: limited to AVX2 there,
with ATEN_CPU_CAPABILITY=avx2, the old checkpoint's probabilities matched the recorded hash again).
So the test compares in two ways:
- within tolerances, on every CPU: ``reference_arrays.pt`` holds the trained weights and the old
  checkpoint's probabilities as floats (``--arrays`` rewrites it; the tolerances and the figures behind
  them are in ``tests/test_reference.py``);
- bit for bit, only on a CPU whose signature is recorded in ``reference_run.json`` (``--add-machine``
  adds this machine's hashes, computed by unchanged code, without touching the old checkpoint); on any
  other CPU those checks skip, naming the signature.
``POINTMAMBA_CPU_SIGNATURE`` stands in for this machine's signature, so the suite can be run as an unknown
CPU would run it (``POINTMAMBA_CPU_SIGNATURE=unknown make test``).
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
CHECKPOINT = FIXTURES / "reference_checkpoint.pth"
RECORD = FIXTURES / "reference_run.json"
ARRAYS = FIXTURES / "reference_arrays.pt"
SIGNATURE_ENV = "POINTMAMBA_CPU_SIGNATURE"
OVERRIDES = ["train.max_steps_per_epoch=2", "train.val_interval=0", "warmup.epochs=1", "warmup.ramp_epochs=2",
             "model.relpos.normalization=quantile", "model.enc_channels=[8,8]", "model.dec_channels=[8]"]


def weights_sha256(state: dict, keys: list[str]) -> str:
    """sha256 over the names and raw bytes of ``keys`` of a state dict, in the order given."""
    h = hashlib.sha256()
    for key in keys:
        t = state[key].detach().cpu().contiguous()
        h.update(key.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def machine_signature() -> str:
    """The CPU as float bits see it: vendor, model name, the kernels torch dispatches to and the CPU numba
    compiles for (``POINTMAMBA_CPU_SIGNATURE`` overrides it, to run the suite as another CPU would)."""
    import os
    import platform

    if os.environ.get(SIGNATURE_ENV):
        return os.environ[SIGNATURE_ENV]

    import torch

    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    # a virtual machine's model name ("Intel(R) Xeon(R) Processor") hides the generation; numba compiles for
    # the generation LLVM detects, so its name is part of the signature
    from llvmlite import binding

    return " | ".join([info.get("vendor_id", platform.machine()), info.get("model name", platform.processor()),
                       torch.backends.cpu.get_cpu_capability(), binding.get_host_cpu_name()])


def recorded_hashes(record: dict) -> dict | None:
    """The hashes recorded for this machine's signature (``machines``), or None: bits are not comparable."""
    for entry in record.get("machines", []):
        if entry["signature"] == machine_signature():
            return entry
    return None


def run_arrays(state: dict, probs) -> dict:
    """What the tolerance checks compare: every floating-point weight and the probabilities, as float32."""
    import torch

    return {"weights": {k: v.detach().cpu().float().clone() for k, v in state.items() if v.is_floating_point()},
            "probs": torch.as_tensor(probs).float()}


def train_tiny(root: Path, work_dir: Path):
    """The trained network (2 epochs of 2 steps, RelPos warm-up 1 epoch + ramp 2, quantile normalization)."""
    sys.path.insert(0, str(HERE.parent))
    from pointmamba.config import load_config
    from pointmamba.training.trainer import Trainer
    from support.tiny import tiny_overrides, write_synthetic

    write_synthetic(root)
    cfg = load_config(None, tiny_overrides(root, work_dir, epochs=2) + OVERRIDES)
    trainer = Trainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer.net


def predict_probs(checkpoint: Path, root: Path):
    """Whole-scan class probabilities of the synthetic validation scan from ``checkpoint`` (no refinement)."""
    import torch
    from pointmamba.data import load_scan
    from pointmamba.inference.pipeline import load_trained, segment_scan

    model, cfg = load_trained(checkpoint, torch.device("cpu"))
    cfg = {**cfg, "infer": {"mirror_tta": True, "graph_cut": False}}
    scan = load_scan(next(root.rglob("SYN00002_upper.obj")))
    return segment_scan(model, scan, cfg, torch.device("cpu")).probs


def add_machine() -> None:
    """Record this machine's hashes beside the others (same code, same old checkpoint)."""
    import torch

    torch.set_num_threads(1)
    record = json.loads(RECORD.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root, work = Path(tmp) / "synth", Path(tmp) / "work"
        state = train_tiny(root, work).state_dict()
        probs = predict_probs(CHECKPOINT, root)
    entry = {"signature": machine_signature(), "weights_sha256": weights_sha256(state, record["keys"]),
             "probs_sha256": hashlib.sha256(probs.tobytes()).hexdigest()}
    record["machines"] = [e for e in record.get("machines", []) if e["signature"] != entry["signature"]] + [entry]
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"added {entry['signature']} to {RECORD}")


def write_arrays() -> None:
    """Record the floats of this machine's run (same code, same old checkpoint) for the tolerance checks."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root, work = Path(tmp) / "synth", Path(tmp) / "work"
        state = train_tiny(root, work).state_dict()
        probs = predict_probs(CHECKPOINT, root)
    torch.save(run_arrays(state, probs), ARRAYS)
    print(f"wrote {ARRAYS} ({ARRAYS.stat().st_size} bytes) on {machine_signature()}")


def main() -> None:
    import torch

    if "--add-machine" in sys.argv[1:]:
        add_machine()
        return
    if "--arrays" in sys.argv[1:]:
        write_arrays()
        return
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root, work = Path(tmp) / "synth", Path(tmp) / "work"
        net = train_tiny(root, work)
        state = net.state_dict()
        keys = sorted(state)
        FIXTURES.mkdir(exist_ok=True)
        ckpt = torch.load(work / "last.pth", weights_only=True)
        ckpt = {k: ckpt[k] for k in ("model", "config", "epoch", "iteration", "hooks") if k in ckpt}
        torch.save(ckpt, CHECKPOINT)
        probs = predict_probs(CHECKPOINT, root)
        torch.save(run_arrays(state, probs), ARRAYS)
        RECORD.write_text(json.dumps({
            "torch": torch.__version__, "keys": keys, "probs_shape": list(probs.shape),
            "warmup_factor": ckpt.get("hooks", {}).get("warmup", {}).get("factor"),
            "machines": [{"signature": machine_signature(), "weights_sha256": weights_sha256(state, keys),
                          "probs_sha256": hashlib.sha256(probs.tobytes()).hexdigest()}],
        }, indent=1) + "\n")
        print(f"wrote {CHECKPOINT} ({CHECKPOINT.stat().st_size} bytes), {ARRAYS} and {RECORD}")


if __name__ == "__main__":
    main()
