"""Diagnostics hook: feature, RelPos and gradient scales every ``diagnostics.interval`` steps.

On a diagnostics step, ``before_step`` sets ``record = {}`` on every RelPos module, so that step's
forward stores detached intermediates there; ``after_backward`` (gradients populated, before clipping)
reads them and the gradients, writes TensorBoard scalars (and histograms), one console line and one line
of ``diagnostics.jsonl`` in the work dir (what ``pointmamba-ablate`` tabulates), and sets ``record = None``
again. With ``diagnostics.epoch_ends`` it also runs on the first step (the model at init, the first batch's
gradients) and on the last step of every epoch. Between diagnostics steps the hook costs one modulo per step; with
``diagnostics.interval: 0`` the trainer does not create it at all.

Tags (``<m>`` is a RelPos module name from ``net.relpos_modules()``, e.g. ``enc0.order0``;
``<g>`` a parameter group: relpos, cpe, mixer, head, other):

- ``diag/<m>/feat_{min,max,mean,std}``: the features entering the module
- ``diag/<m>/{dist_emb,dir_emb}_{mean,std}``: distance and direction embeddings
- ``diag/<m>/gate_{min,mean,max}``; ``diag/<m>/contrib_ratio`` = std(ramp*scale*gate*pos) / std(feat)
- ``diag/<m>/scale`` (learnable scale), ``diag/<m>/ramp``, ``diag/<m>/enabled``
- ``diag/<m>/dist_{mean,p95}`` (mm), ``diag/<m>/dist_norm_mean``, ``diag/<m>/dist_clip_frac`` (normalized
  distance saturated at 1), ``diag/<m>/norm_scale`` (max_rel_dist, or the running quantile)
- ``diag/grad_norm/<g>``, ``diag/param_norm/<g>``, ``diag/grad_ratio/<g>`` = grad norm / param norm
- ``diag/growth/<g>``: the larger of grad norm and param norm, each over the group's own value at its first
  diagnostics step (kept across a resume)
- ``diag/flags/exploding/<g>``, 0 or 1: ratio above the group's threshold (``explode_ratio`` times
  :data:`EXPLODE_FACTORS`) or growth above ``explode_growth``; ``diag/flags/vanishing/<g>``: ratio < vanish_ratio
- histograms ``diag/<m>/gate`` and ``diag/<m>/dist_norm`` (``diagnostics.histograms``)
- ``diag/hook_ms``: time this hook spent on the step (reading records and gradients, writing)
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from .hooks import Hook, TrainerView
from .work_dir import json_line


PARAM_GROUPS: dict[str, str] = {
    "relpos": "relpos",  # PositionSlot.relpos (one RelPos per order)
    "cpe": "cpe",  # PositionSlot.cpe
    "cpe_stem": "cpe",  # the stem (a sparse conv like the CPE)
    "mixer": "mixer",  # MambaBlock.mixer (BiMamba)
    "head": "head",  # the classifier
}
"""Module attribute name -> parameter group; a parameter takes the group of the first name in its dotted
path found here, else "other" (norms, pooling, other position variants)."""
GROUPS = ("relpos", "cpe", "mixer", "head")
EXPLODE_FACTORS: dict[str, float] = {"head": 20.0, "cpe": 10.0, "other": 5.0, "mixer": 1.0, "relpos": 1.0}
"""Per module kind, the multiple of ``explode_ratio`` above which a grad/param ratio counts as exploding. The
classifier head, the CPE/stem convolutions and the norms ("other") hold few weights right next to the loss
or the input, so a healthy step moves them by a large fraction: at init, healthy runs measured head 0.41-0.45,
cpe 0.15-0.43, other 0.03-0.12, mixer and relpos <= 0.002 (tiny and default models, synthetic scans, lr
0.01 / 0.002). One threshold of 0.1 flagged the head on every step of every run."""
_HIST_MAX = 1 << 16  # values per histogram (strided subsample): bounds the numpy/protobuf cost


def param_group(name: str) -> str:
    """Parameter group of a parameter name (see :data:`PARAM_GROUPS`)."""
    for part in name.split("."):
        if part in PARAM_GROUPS:
            return PARAM_GROUPS[part]
    return "other"


def relpos_modules(net: Any) -> list[tuple[str, Any]]:
    fn = getattr(net, "relpos_modules", None)
    return list(fn()) if fn is not None else []


def module_stats(rec: dict[str, Any]) -> dict[str, float]:
    """Scalar statistics of one RelPos record (keys of ``pointmamba.models.relpos.RECORD_KEYS``)."""
    feat = rec["feat"].float()
    gate = rec["gate"].float()
    dist = rec["dist"].float()
    dist_norm = rec["dist_norm"].float()
    dist_emb, dir_emb = rec["dist_emb"].float(), rec["dir_emb"].float()
    feat_std = feat.std()
    stats = {
        "feat_min": feat.min(), "feat_max": feat.max(), "feat_mean": feat.mean(), "feat_std": feat_std,
        "dist_emb_mean": dist_emb.mean(), "dist_emb_std": dist_emb.std(),
        "dir_emb_mean": dir_emb.mean(), "dir_emb_std": dir_emb.std(),
        "gate_min": gate.min(), "gate_mean": gate.mean(), "gate_max": gate.max(),
        "contrib_ratio": rec["contribution"].float().std() / feat_std.clamp_min(1e-12),
        "dist_mean": dist.mean(), "dist_norm_mean": dist_norm.mean(),
        "dist_clip_frac": (dist_norm >= 1.0).float().mean(),
    }
    names = list(stats)
    values = torch.stack([stats[n] for n in names]).tolist()  # one device->host transfer
    out = dict(zip(names, values))
    positive = dist[dist > 0]
    if positive.numel():
        positive = positive[:: max(1, positive.numel() // _HIST_MAX)]
        out["dist_p95"] = float(torch.quantile(positive, 0.95))
    out["scale"] = float(rec["scale"])
    out["norm_scale"] = float(rec["norm_scale"])
    return out


def grad_ratios(net: torch.nn.Module) -> dict[str, dict[str, float]]:
    """Per parameter group: grad norm, param norm and their ratio, over parameters that have a gradient
    (a group without any, e.g. RelPos during warm-up, is left out)."""
    grads: dict[str, list[Tensor]] = {}
    params: dict[str, list[Tensor]] = {}
    for name, p in net.named_parameters():
        if p.grad is None:
            continue
        g = param_group(name)
        grads.setdefault(g, []).append(torch.linalg.vector_norm(p.grad.detach().float()))
        params.setdefault(g, []).append(torch.linalg.vector_norm(p.detach().float()))
    out = {}
    for g in grads:
        gn = float(torch.linalg.vector_norm(torch.stack(grads[g])))
        pn = float(torch.linalg.vector_norm(torch.stack(params[g])))
        out[g] = {"grad_norm": gn, "param_norm": pn, "ratio": gn / max(pn, 1e-12)}
    return out


def _subsample(x: Tensor) -> Tensor:
    x = x.reshape(-1)
    return x[:: max(1, x.numel() // _HIST_MAX)].float().cpu()


class DiagnosticsHook(Hook):
    """See the module docstring. Arguments are the ``diagnostics`` config section."""

    name = "diagnostics"

    def __init__(self, interval: int, histograms: bool = True, explode_ratio: float = 0.1,
                 vanish_ratio: float = 1e-5, epoch_ends: bool = False, explode_growth: float = 10.0) -> None:
        if interval < 0:
            raise ValueError(f"diagnostics.interval must be >= 0, got {interval}")
        if not 0 < vanish_ratio < explode_ratio:
            raise ValueError(f"diagnostics: need 0 < vanish_ratio < explode_ratio, got {vanish_ratio}, {explode_ratio}")
        if not explode_growth > 1:
            raise ValueError(f"diagnostics: explode_growth must be > 1, got {explode_growth}")
        self.interval = interval
        self.histograms = histograms
        self.explode_ratio = explode_ratio
        self.vanish_ratio = vanish_ratio
        # with Adam a too-large learning rate blows the weights (and then the gradients) up while their
        # ratio falls: lr x100 took the CPE weights' norm 35 -> 351 and the mixers' gradient 0.18 -> 9.2 in
        # one step, ratios 0.15 -> 0.016. Growth over the group's first diagnosed step catches that.
        self.explode_growth = explode_growth
        self.first: dict[str, dict[str, float]] = {}  # group -> grad and param norm at its first diagnostics step
        self.epoch_ends = epoch_ends
        self._armed: list[Any] = []  # modules whose ``record`` this hook set
        self._t_hook = 0.0
        self.last: dict[str, Any] = {}  # the last step's figures (tests, interactive use)

    # ------------------------------------------------------------------ arming
    def _due(self, trainer: TrainerView) -> bool:
        # only the main process writes; other ranks pay nothing
        if trainer.writer is None:
            return False
        step = trainer.iteration + 1
        if self.interval > 0 and step % self.interval == 0:
            return True
        return self.epoch_ends and (step == 1 or step % trainer.steps_per_epoch == 0)

    def _disarm(self) -> None:
        for module in self._armed:
            module.record = None
        self._armed = []

    def before_epoch(self, trainer: TrainerView) -> None:
        self._disarm()

    def before_step(self, trainer: TrainerView) -> None:
        if self._armed:  # the previous diagnostics step was skipped (non-finite loss)
            self._disarm()
        if not self._due(trainer):
            return
        t0 = time.perf_counter()
        for _, module in relpos_modules(trainer.net):
            module.record = {}
            self._armed.append(module)
        self._t_hook = time.perf_counter() - t0

    def after_step(self, trainer: TrainerView, loss: float) -> None:
        self._disarm()

    def after_train(self, trainer: TrainerView) -> None:
        self._disarm()

    def state_dict(self) -> dict[str, Any]:
        return {"first": {g: dict(v) for g, v in self.first.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.first = {str(g): {k: float(x) for k, x in v.items()} for g, v in (state.get("first") or {}).items()}

    def threshold(self, group: str) -> float:
        """The grad/param ratio above which ``group`` counts as exploding."""
        return self.explode_ratio * EXPLODE_FACTORS.get(group, 1.0)

    # ------------------------------------------------------------------ reading
    def after_backward(self, trainer: TrainerView) -> None:
        if not self._due(trainer):
            return
        t0 = time.perf_counter()
        writer = trainer.writer
        step = trainer.iteration + 1
        modules: dict[str, dict[str, float]] = {}
        for name, module in relpos_modules(trainer.net):
            rec = module.record
            stats: dict[str, float] = {"enabled": float(bool(module.enabled)), "ramp": float(module.ramp)}
            scale = getattr(module, "scale", None)
            if isinstance(scale, Tensor):
                stats["scale"] = float(scale.detach().float().mean())
            if rec:  # empty when the module is switched off (warm-up) or was not called
                stats.update(module_stats(rec))
                if self.histograms:
                    writer.add_histogram(f"diag/{name}/gate", _subsample(rec["gate"]), step)
                    writer.add_histogram(f"diag/{name}/dist_norm", _subsample(rec["dist_norm"]), step)
            for key, value in stats.items():
                writer.add_scalar(f"diag/{name}/{key}", value, step)
            modules[name] = stats
        self._disarm()
        groups = grad_ratios(trainer.net)
        flags: dict[str, list[str]] = {"exploding": [], "vanishing": []}
        for g, v in groups.items():
            first = self.first.setdefault(g, {"grad_norm": v["grad_norm"], "param_norm": v["param_norm"]})
            v["growth"] = max(v["grad_norm"] / max(first["grad_norm"], 1e-12),
                              v["param_norm"] / max(first["param_norm"], 1e-12))
            exploding = v["ratio"] > self.threshold(g) or v["growth"] > self.explode_growth
            vanishing = v["ratio"] < self.vanish_ratio
            v["exploding"], v["vanishing"] = float(exploding), float(vanishing)
            if exploding:
                flags["exploding"].append(g)
            if vanishing:
                flags["vanishing"].append(g)
            writer.add_scalar(f"diag/grad_norm/{g}", v["grad_norm"], step)
            writer.add_scalar(f"diag/param_norm/{g}", v["param_norm"], step)
            writer.add_scalar(f"diag/grad_ratio/{g}", v["ratio"], step)
            writer.add_scalar(f"diag/growth/{g}", v["growth"], step)
            writer.add_scalar(f"diag/flags/exploding/{g}", v["exploding"], step)
            writer.add_scalar(f"diag/flags/vanishing/{g}", v["vanishing"], step)
        hook_ms = 1000.0 * (time.perf_counter() - t0 + self._t_hook)
        writer.add_scalar("diag/hook_ms", hook_ms, step)
        self.last = {"step": step, "epoch": trainer.epoch + 1, "modules": modules, "groups": groups, "flags": flags,
                     "hook_ms": hook_ms}
        trainer.log(self.summary_line(self.last))
        if getattr(trainer, "work_dir", None) is not None:
            from ..utils.atomic_file import append_text

            append_text(trainer.work_dir / "diagnostics.jsonl", json_line(self.last))

    def summary_line(self, last: dict[str, Any]) -> str:
        """One compact line: gate range and contribution over the active RelPos modules, grad/param per
        group, flags."""
        parts = [f"diag step {last['step']}"]
        active = [s for s in last["modules"].values() if "gate_mean" in s]
        if active:
            gmin = min(s["gate_min"] for s in active)
            gmean = sum(s["gate_mean"] for s in active) / len(active)
            gmax = max(s["gate_max"] for s in active)
            contrib = max(s["contrib_ratio"] for s in active)
            scale = sum(s["scale"] for s in active) / len(active)
            fmin, fmax = min(s["feat_min"] for s in active), max(s["feat_max"] for s in active)
            fstd = max(s["feat_std"] for s in active)
            parts.append(f"relpos x{len(active)}: gate {gmin:.3f}/{gmean:.3f}/{gmax:.3f} "
                         f"contrib<= {contrib:.3g} scale~{scale:.3g} feat [{fmin:.3g}, {fmax:.3g}] std<= {fstd:.3g}")
        elif last["modules"]:
            parts.append(f"relpos x{len(last['modules'])}: off")
        if last["groups"]:
            parts.append("grad/param " + " ".join(f"{g} {v['ratio']:.2e}" for g, v in last["groups"].items()))
        for kind, groups in last["flags"].items():
            if groups:
                why = {g: last["groups"][g] for g in groups}
                parts.append(f"{kind.upper()}: " + ",".join(
                    f"{g} ({v['ratio']:.2g} grad/param, {v.get('growth', 1.0):.3g}x its first)" for g, v in why.items()))
        parts.append(f"{last['hook_ms']:.1f} ms")
        return " | ".join(parts)
