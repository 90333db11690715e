"""Upper or lower jaw, told from the teeth, for scans whose name does not say (``--jaw auto``).

The 17-class network's classes are positions along the arch (central incisor .. third molar), the same in
both jaws, and the graph cut needs no jaw. (The shipped networks also take the jaw as an input channel: a
scan without one is shown to them as "upper" and asked again if it turns out lower; see
:func:`~.inference.segment_scan`.) The instance numbering needs the jaw: its priors hold each jaw's tooth widths (a lower central incisor is about
5.1 mm wide, an upper one 7.9 mm; lower molars are the wider ones) and missing rates
(:data:`~.arch_priors.FITTED`). So the arch is numbered under both jaws' priors and the jaw under which
the numbering's model explains the teeth better wins: the difference of the two log partition functions
(``-log Z``, the evidence summed over every numbering of the arch, not only the best one) is the margin in
nats. It reads merged or missing teeth the way the numbering does, and needs no classifier of its own.
Measured on the 187 labelled scans of ``../shared`` (``docs/results/jaw_from_teeth/``).

Where the name (or ``--jaw``) says the jaw, the other jaw's numbering is still made, and a geometry that
disagrees by more than :data:`DISAGREE_NATS` is reported.
"""
from __future__ import annotations

from dataclasses import dataclass

UNSURE_NATS = 1.0
"""A jaw told from the teeth by less than this (odds below e:1) is flagged for review (the results README
has the margins on the shared scans)."""
DISAGREE_NATS = 2.0
"""The teeth contradict the jaw a file name gives by more than this: a warning and a review finding."""


@dataclass(frozen=True)
class JawCall:
    """Which jaw the teeth say (``teeth``) by how much (``nats`` >= 0: the other jaw's numbering costs that
    much more), and where the jaw used came from (``source``: "given" or "teeth")."""

    used: str
    source: str
    teeth: str
    nats: float

    def finding(self) -> tuple[str, str] | None:
        """A review finding: a jaw told from the teeth with a thin margin, or a given jaw the teeth contradict."""
        if self.source == "teeth" and self.nats < UNSURE_NATS:
            return ("jaw", f"{self.used} jaw told from the teeth by only {self.nats:.1f} nats: check it "
                           "(--jaw upper|lower)")
        if self.source == "given" and self.teeth != self.used and self.nats > DISAGREE_NATS:
            return ("jaw", f"named {self.used} jaw, but its teeth read as {self.teeth} ({self.nats:.1f} nats)")
        return None

    def to_json(self) -> dict[str, object]:
        return {"used": self.used, "source": self.source, "teeth": self.teeth, "margin_nats": round(self.nats, 2)}


def call_jaw(costs: dict[str, float], given: str | None) -> JawCall:
    """The jaw from the numbering's ``-log Z`` under each jaw (``costs``), or ``given`` where a name said it."""
    teeth = min(costs, key=costs.get)
    nats = abs(costs["upper"] - costs["lower"])
    return JawCall(given or teeth, "given" if given else "teeth", teeth, float(nats))
