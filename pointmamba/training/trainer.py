"""The training loop: AdamW + schedule, clipping, AMP on CUDA, DDP, validation, atomic checkpoints, resume."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from ..utils.atomic_file import append_text, atomic_write
from ..data.preflight import check_dataset, mirrored_scans
from ..utils.device import autocast, resolve_device
from ..evaluation.evaluate import evaluate
from ..checkpoints.checkpoint import (CheckpointError, check_model_config, check_resume_state, load_checkpoint, load_model_weights,
                         save_checkpoint)
from .data_builders import build_dataset, build_loader, ensure_data, prefetch
from .distributed import DistInfo, all_reduce_sum, barrier, cleanup, init_distributed
from .hooks import Hook
from .loss import balanced_class_weights, class_counts, segmentation_loss
from .optim import build_optimizer, build_scheduler
from .seed import rng_state, set_deterministic, set_rng_state, set_seed
from .warmup import WarmupSwitch
from .work_dir import (WorkDirLock, check_previous_run, check_work_dir_path, clear_previous_run, json_line,
                       read_metrics, remove_stale_temp_files, resume_checkpoint)


class TrainingDiverged(RuntimeError):
    """Too many non-finite losses in a row."""


def build_hooks(cfg: dict[str, Any]) -> list[Hook]:
    """The hooks a config asks for: the RelPos warm-up switch, diagnostics when ``diagnostics.interval`` > 0
    or ``diagnostics.epoch_ends``."""
    hooks: list[Hook] = [WarmupSwitch(cfg["warmup"]["epochs"], cfg["warmup"]["ramp_epochs"])]
    if cfg["diagnostics"]["interval"] > 0 or cfg["diagnostics"]["epoch_ends"]:
        from .diagnostics import DiagnosticsHook

        hooks.append(DiagnosticsHook(**cfg["diagnostics"]))
    return hooks


class Trainer:
    """Builds everything from a resolved config (``pointmamba.config.load_config``) and trains.

    ``net`` is the bare model (hooks and checkpoints use it); ``model`` is what the loop calls (DDP-wrapped
    under torchrun). Checkpoints ``last.pth`` (every epoch) and ``best.pth`` (best val mIoU) go to the
    work dir together with ``config.yaml``, ``metrics.jsonl`` (one line per epoch) and TensorBoard events.
    """

    def __init__(self, cfg: dict[str, Any], resume: bool = False, hooks: list[Hook] | None = None,
                 overwrite: bool = False) -> None:
        self.cfg = cfg
        self.lock: WorkDirLock | None = None
        self.writer: Any = None
        try:
            self._build(resume, hooks, overwrite)
        except BaseException:
            self.close()  # a failed start releases the work dir (and the process group)
            raise

    def _build(self, resume: bool, hooks: list[Hook] | None, overwrite: bool) -> None:
        from ..config import dump_config

        cfg = self.cfg
        resume_from, resume_state = self.build_device_and_work_dir(resume, overwrite)
        set_deterministic()
        set_seed(cfg["seed"])  # same on every rank: identical initial weights
        self.build_data()
        if self.is_main:  # only now, with the data checked: a failed start leaves a previous run intact
            if not resume:  # --overwrite; else what a run that saved no checkpoint left (nothing to resume)
                clear_previous_run(self.work_dir, self.log, "--overwrite: removed the previous run's" if overwrite else
                                   "removed what a run that saved no checkpoint left (killed in its first epoch?):")
            dump_config(cfg, self.work_dir / "config.yaml")
        self.train_scans: list[str] = list(self.train_set.names)  # with init_from: the starting model's added
        self.build_model(init_from=cfg["train"]["init_from"] if not resume else None)
        self.build_optimizer()
        self.writer = self.build_writer()
        self.hooks: list[Hook] = build_hooks(cfg) + list(hooks or [])
        if self.writer is not None:
            from .tensorboard_logs import log_config

            log_config(self.writer, cfg)

        self.epoch = 0
        self.iteration = 0
        self.best_miou = -math.inf
        self.nonfinite_total = 0
        self.nonfinite_streak = 0
        self.last_finite_loss: float | None = None
        set_seed(cfg["seed"] + self.dist.rank)  # training randomness differs per rank
        if resume_state is not None:
            self.resume(resume_from, resume_state)

    # ------------------------------------------------------------------ build steps (in this order)
    def build_device_and_work_dir(self, resume: bool, overwrite: bool) -> tuple[Path | None, dict[str, Any] | None]:
        """Device, process group, work dir checks and lock; the checkpoint to resume from and its content
        (read, not applied)."""
        self.device = resolve_device(self.cfg["train"]["device"])
        self.dist: DistInfo = init_distributed(self.device.type)
        if self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
        self.work_dir = Path(self.cfg["work_dir"])
        self.is_main = self.dist.is_main
        # before anything is written: one run at a time (the lock, taken before the other checks so that a
        # live run is named as such), a previous run is replaced only when asked, and a resumed one only by
        # the same model (config.yaml is rewritten only after that check)
        check_work_dir_path(self.work_dir, resume, overwrite)
        if self.is_main:
            self.lock = WorkDirLock(self.work_dir)
        check_previous_run(self.work_dir, resume, overwrite)
        resume_from = resume_checkpoint(self.work_dir) if resume else None
        resume_state = None
        if resume_from is not None:
            resume_state = load_checkpoint(resume_from, map_location="cpu")
            check_model_config(resume_state, self.cfg, resume_from)
        if self.is_main:
            remove_stale_temp_files(self.work_dir)
        return resume_from, resume_state

    def build_data(self) -> None:
        """Training and validation sets and loaders, every scan read and checked now."""
        cfg, t = self.cfg, self.cfg["train"]
        try:
            if self.is_main:
                ensure_data(cfg, self.log)
            barrier(self.dist)
            self.train_set = build_dataset(cfg, "train", train=True)
            drawn = self.train_set
            if cfg["data"]["scan_repeats"]:
                from ..data.repeated_scans import RepeatedScans

                drawn = RepeatedScans(self.train_set, cfg["data"]["scan_repeats"])
            self.train_loader = build_loader(drawn, cfg, train=True, dist=self.dist)
            self.val_loader = None
            val_set = None
            if t["val_interval"] > 0 and (cfg["data"]["val_names"] is not None or self._split_exists("val")):
                val_set = build_dataset(cfg, "val", train=False)
                self.val_loader = build_loader(val_set, cfg, train=False, dist=self.dist)
            # every scan read now (and cached): a bad file stops the run here, not at the first validation
            check_dataset(self.train_set, "training", progress=t["progress"] and self.is_main)
            if val_set is not None:
                check_dataset(val_set, "validation", progress=t["progress"] and self.is_main)
            for path, reason in mirrored_scans(self.train_set) if self.is_main else []:
                self.log(f"warning: {path}: {reason}; check its labels (pointmamba-check-data)")
        except (ValueError, FileNotFoundError) as exc:
            self.log(f"error: {exc}")
            raise
        self.build_loss_weights()

    def build_loss_weights(self) -> None:
        """Class weights (``train.class_balance``) and whether scans carry loss weights
        (``data.position_label_weight``), logged with what they apply to."""
        t, d = self.cfg["train"], self.cfg["data"]
        self.class_weight: torch.Tensor | None = None
        if t["class_balance"] > 0:
            weights = balanced_class_weights(class_counts(self.train_set), t["class_balance"])
            self.class_weight = torch.tensor(weights, dtype=torch.float32, device=self.device)
            self.log("class weights (train.class_balance=" + f"{t['class_balance']}): "
                     + " ".join(f"{c}:{w:.2f}" for c, w in enumerate(weights)))
        self.weighted_scans = d["position_label_weight"] != 1.0
        if self.weighted_scans or d["missing_teeth"]:
            noisy = [n for i, n in enumerate(self.train_set.names) if not self.train_set.labels_are_identities(i)]
            self.log(f"{len(noisy)} training scan(s) labelled by position with teeth missing (loss weight "
                     f"{d['position_label_weight']}, no missing-tooth augmentation): {', '.join(noisy) or 'none'}")

    def build_model(self, init_from: str | None = None) -> None:
        """``net`` (optionally with fine-tuning weights) and ``model`` (DDP-wrapped under torchrun)."""
        from .. import build_model as build_network

        self.net: nn.Module = build_network(self.cfg).to(self.device)
        if init_from:
            self._init_from(init_from)
        self.model: nn.Module = self.net
        if self.dist.enabled:
            # RelPos modules switched off by the warm-up hook leave parameters without gradients
            self.model = nn.parallel.DistributedDataParallel(
                self.net,
                device_ids=[self.dist.local_rank] if self.device.type == "cuda" else None,
                find_unused_parameters=True,
            )

    def build_optimizer(self) -> None:
        """Steps per epoch, optimizer, schedule and mixed precision."""
        t = self.cfg["train"]
        self.steps_per_epoch = len(self.train_loader)
        if t["max_steps_per_epoch"]:
            self.steps_per_epoch = min(self.steps_per_epoch, t["max_steps_per_epoch"])
        self.optimizer = build_optimizer(self.net, self.cfg)
        self.scheduler = build_scheduler(self.optimizer, self.cfg, self.steps_per_epoch * t["epochs"])
        self.amp = bool(t["amp"]) and self.device.type == "cuda"

    def build_writer(self) -> Any:
        """The TensorBoard writer (main process only, else None)."""
        if not self.is_main:
            return None
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(str(self.work_dir / "tb"))

    # ------------------------------------------------------------------ helpers
    def _init_from(self, name: str) -> None:
        """Fine-tuning: load the weights (not the optimizer or schedule) of a checkpoint or the shipped model."""
        from ..checkpoints.shipped import resolve_checkpoint
        from ..checkpoints.checkpoint import input_hint
        from .training_scans import of_state

        path = resolve_checkpoint(name)
        state = load_checkpoint(path, map_location=self.device)
        own = self.net.state_dict()
        bad = [k for k, v in state["model"].items() if k not in own or own[k].shape != v.shape]
        missing = [k for k in own if k not in state["model"]]
        if bad or missing:
            raise ValueError(f"train.init_from={name!r} ({path}): the weights do not fit model config "
                             f"({len(bad)} unexpected or differently shaped, {len(missing)} missing, e.g. "
                             f"{(bad + missing)[0]}); use the checkpoint's model section"
                             + input_hint(state.get("config") or {}, self.cfg))
        self.net.load_state_dict(state["model"])
        self._add_starting_scans(path, of_state(state))
        others = state.get("average_with") or []  # a file of averaged networks: its first is the one at the top
        self.log(f"initialized from {path}" + (f" (the first of its {len(others) + 1} averaged networks)" if others else ""))

    def _add_starting_scans(self, path: Path, scans: Any) -> None:
        """A starting model's (fine-tuning) training ``scans``
        (:func:`~.training_scans.of_state`; None: unknown) count as this run's: its scores on them are fit."""
        if scans is None:
            self.log(f"warning: {path} records no training scans and its config does not determine them here: "
                     "this run's checkpoints list only its own")
            return
        entries = scans.parts[0][0]  # a split file's patient IDs stand for both jaws
        names = {n if n.endswith(("_upper", "_lower")) else f"{n}_{jaw}" for n in entries
                 for jaw in ("upper", "lower")}
        self.train_scans = sorted(set(self.train_scans) | set(scans.among(sorted(names))))

    def _split_exists(self, split: str) -> bool:
        from ..data.dataset import read_split, split_path

        d = self.cfg["data"]
        path = split_path(d["root"], d[f"{split}_split"], d["split_dir"])
        return path.is_file() and bool(read_split(path))

    def log(self, msg: str) -> None:
        if not self.is_main:
            return
        tqdm.write(msg)
        append_text(self.work_dir / "train.log", msg + "\n")

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "epoch": self.epoch,
            "iteration": self.iteration,
            "best_miou": self.best_miou,
            "nonfinite_total": self.nonfinite_total,
            "rng": rng_state(),
            "hooks": {h.name: h.state_dict() for h in self.hooks},
            "config": {k: v for k, v in self.cfg.items() if not k.startswith("_")},
            "train_scans": sorted(self.train_scans),  # read by tools/test.py and predict --reference
        }

    def resume(self, path: Path, state: dict[str, Any] | None = None) -> None:
        """Continue from checkpoint ``path`` (``state``: its content, when already loaded)."""
        if state is None:
            state = load_checkpoint(path, map_location="cpu")
            check_model_config(state, self.cfg, path)
        check_resume_state(state, path)
        load_model_weights(self.net, state["model"], path)
        try:  # a foreign or crafted file: one line naming it, not the optimizer's traceback
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
            for hook in self.hooks:
                hook.load_state_dict(state["hooks"].get(hook.name, {}))
        except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as exc:
            raise CheckpointError(f"{path}: cannot resume from it: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        self.epoch, self.iteration = state["epoch"], state["iteration"]
        self.best_miou = state["best_miou"]
        self.nonfinite_total = state["nonfinite_total"]
        self._truncate_metrics()
        self.log(f"resumed from {path} at epoch {self.epoch}, iteration {self.iteration}")

    def _truncate_metrics(self) -> None:
        """Drop metric lines of epochs the checkpoint does not contain (written just before a crash)."""
        path = self.work_dir / "metrics.jsonl"
        if not self.is_main or not path.is_file():
            return
        records = [r for r in read_metrics(path, warn=lambda m: self.log(f"warning: {m}")) if r["epoch"] <= self.epoch]
        atomic_write(path, "".join(json_line(r) for r in records).encode())

    def _call(self, event: str, *args: Any) -> None:
        for hook in self.hooks:
            getattr(hook, event)(self, *args)

    # ------------------------------------------------------------------ loop
    def train(self) -> dict[str, Any]:
        """Run the remaining epochs; returns the last epoch's record."""
        t = self.cfg["train"]
        drawn = len(self.train_loader.dataset)
        extra = f" ({drawn} draws an epoch, data.scan_repeats)" if drawn != len(self.train_set) else ""
        self.log(f"training on {self.device} ({self.dist.world_size} process(es)), {len(self.train_set)} scans{extra}, "
                 f"{self.steps_per_epoch} steps/epoch, work dir {self.work_dir}")
        record: dict[str, Any] = {}
        self._call("before_train")
        try:
            for epoch in range(self.epoch, t["epochs"]):
                self.epoch = epoch
                record = self.train_epoch()
                if self.val_loader is not None and (epoch + 1) % t["val_interval"] == 0:
                    record.update(self.validate())
                self.epoch = epoch + 1
                self.end_epoch(record)
                self._call("after_epoch")
        finally:
            self._call("after_train")
            if self.writer is not None:
                self.writer.flush()
        return record

    def train_epoch(self) -> dict[str, Any]:
        t = self.cfg["train"]
        self.train_loader.sampler.set_epoch(self.epoch)
        if hasattr(self.train_set, "set_epoch"):
            self.train_set.set_epoch(self.epoch)
        self._call("before_epoch")
        self.model.train()
        loss_sum, steps, points, t0 = 0.0, 0, 0, time.perf_counter()
        bar = tqdm(total=self.steps_per_epoch, desc=f"epoch {self.epoch + 1}/{t['epochs']}",
                   disable=not (t["progress"] and self.is_main), leave=False, dynamic_ncols=True)
        # without loader workers, a thread loads the next batch while this one trains
        batches = prefetch(self.train_loader) if self.cfg["data"]["num_workers"] == 0 else iter(self.train_loader)
        for step, batch in enumerate(batches):
            if step >= self.steps_per_epoch:
                break
            loss = self.train_step(batch)
            if loss is not None:
                loss_sum += loss
                steps += 1
            points += len(batch)
            rate = points / (time.perf_counter() - t0)
            bar.set_postfix(loss=f"{loss if loss is not None else float('nan'):.4f}",
                            lr=f"{self.scheduler.get_last_lr()[0]:.2e}", pts_s=f"{rate:.0f}")
            bar.update(1)
        bar.close()
        if hasattr(batches, "close"):
            batches.close()  # stops the prefetch thread after an early break
        elapsed = time.perf_counter() - t0
        return {
            "epoch": self.epoch + 1,
            "train_loss": loss_sum / max(steps, 1),
            "lr": self.scheduler.get_last_lr()[0],
            "points_per_s": points * self.dist.world_size / max(elapsed, 1e-9),
            "epoch_s": elapsed,
            "nonfinite_total": self.nonfinite_total,
        }

    def train_step(self, batch: Any) -> float | None:
        """One optimizer step; returns the loss, or None when the loss was non-finite and the step skipped."""
        t = self.cfg["train"]
        batch = batch.to(self.device)
        target = batch.extra["segment"]
        self._call("before_step")
        with autocast(self.device, self.amp):
            logits = self.model(batch)
        point_weight = batch.extra["scan_weight"][batch.batch] if self.weighted_scans else None
        loss = segmentation_loss(logits, target, t["label_smoothing"], self.class_weight, point_weight)
        # every rank must agree to skip, or DDP's gradient all-reduce would hang
        finite = all_reduce_sum(torch.tensor([float(torch.isfinite(loss))], device=self.device), self.dist)
        if int(finite.item()) != self.dist.world_size:
            self.nonfinite_total += 1
            self.nonfinite_streak += 1
            self.optimizer.zero_grad(set_to_none=True)
            self.log(f"step {self.iteration}: non-finite loss, step skipped "
                     f"({self.nonfinite_streak} in a row, {self.nonfinite_total} in total)")
            if self.nonfinite_streak >= t["max_nonfinite"]:
                raise TrainingDiverged(
                    f"training stopped at step {self.iteration} (epoch {self.epoch + 1}): {self.nonfinite_streak} "
                    f"non-finite losses in a row (train.max_nonfinite={t['max_nonfinite']}); last finite loss: "
                    f"{self.last_finite_loss}. Lower train.lr or check the data."
                )
            return None
        self.nonfinite_streak = 0
        loss.backward()
        self._call("after_backward")
        if t["grad_clip"] > 0:
            grad_norm = float(nn.utils.clip_grad_norm_(self.net.parameters(), t["grad_clip"]))
        else:
            grad_norm = float("nan")
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        value = float(loss.detach())
        self.last_finite_loss = value
        self.iteration += 1
        if self.writer is not None:  # the loss every step (a short run of a few steps still shows a curve)
            self.writer.add_scalar("train/loss", value, self.iteration)
            if self.iteration % t["log_interval"] == 0 or self.iteration == 1:
                self.writer.add_scalar("train/lr", self.scheduler.get_last_lr()[0], self.iteration)
                self.writer.add_scalar("train/grad_norm", grad_norm, self.iteration)
        self._call("after_step", value)
        return value

    def validate(self) -> dict[str, Any]:
        """Rank 0 evaluates the whole val split (no duplicated padding samples); others wait."""
        out: dict[str, Any] = {}
        if self.is_main:
            metrics, _ = evaluate(self.net, self.val_loader, self.cfg["data"]["num_classes"], self.device,
                                  self.amp, progress=self.cfg["train"]["progress"])
            out = {"val_loss": metrics["loss"], "val_miou": metrics["miou"], "val_accuracy": metrics["accuracy"],
                   "val_mdice": metrics["mdice"], "val_iou": metrics["iou"]}
            assert self.writer is not None
            for key in ("val_loss", "val_miou", "val_accuracy", "val_mdice"):
                self.writer.add_scalar(key.replace("_", "/", 1), out[key], self.iteration)
            from .tensorboard_logs import log_class_iou, log_val_picture

            log_class_iou(self.writer, metrics["iou_by_jaw"], self.cfg["data"]["num_classes"], self.iteration)
            log_val_picture(self.writer, self.net, self.val_loader.dataset, self.cfg, self.device,
                            self.work_dir / "val_pictures" / f"epoch_{self.epoch + 1:03d}.png", self.epoch + 1,
                            self.iteration)
        barrier(self.dist)
        return out

    def end_epoch(self, record: dict[str, Any]) -> None:
        """Log the epoch, write last (and best) checkpoints and the metrics line."""
        if not self.is_main:
            barrier(self.dist)
            return
        assert self.writer is not None
        self.writer.add_scalar("train/epoch_loss", record["train_loss"], self.iteration)
        self.writer.add_scalar("train/points_per_s", record["points_per_s"], self.iteration)
        msg = (f"epoch {record['epoch']}/{self.cfg['train']['epochs']}: loss {record['train_loss']:.4f} "
               f"lr {record['lr']:.2e} {record['points_per_s']:.0f} pts/s")
        if "val_miou" in record:
            msg += f" | val mIoU {record['val_miou']:.4f} acc {record['val_accuracy']:.4f}"
        # lines past the resumed epoch are dropped on resume
        append_text(self.work_dir / "metrics.jsonl", json_line({k: v for k, v in record.items() if k != "val_iou"}))
        improved = record.get("val_miou", -math.inf) > self.best_miou
        if improved:
            self.best_miou = record["val_miou"]
        state = self.state_dict()
        saved = []
        if improved:
            # best.pth first: killed between the two saves, last.pth is one epoch behind and --resume redoes
            # that epoch; the other order left a last.pth whose best_miou no best.pth held (best lost)
            save_checkpoint(state, self.work_dir / "best.pth")
            saved.append("best.pth")
        save_checkpoint(state, self.work_dir / "last.pth")
        saved.append("last.pth")
        self.log(f"{msg} | saved {', '.join(saved)}")
        barrier(self.dist)

    def close(self) -> None:
        """Close the TensorBoard writer, leave the process group, release the work dir."""
        if self.writer is not None:
            self.writer.close()
        if hasattr(self, "dist"):
            cleanup(self.dist)
        if self.lock is not None:
            self.lock.release()
            self.lock = None
