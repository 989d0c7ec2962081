"""The seeded fault schedule of a chaos soak (pure: no I/O, no clock).

Over a soak of ``duration`` seconds, one seed picks:

| fault | when (fraction of the duration) | what |
|---|---|---|
| ``loss`` | 0.10 to 0.90 | 1 % loss on one T0–T1 link |
| ``controller`` | starts in 0.15–0.25 | the controller SIGKILLed, restarted 0.5 s later |
| ``agent`` | starts in 0.28–0.38 | one host agent stopped (SIGTERM) and started again |
| ``switches`` | starts in 0.42–0.50 | the P4Runtime server of every switch SIGKILLed, restarted 1 s later |
| ``flap`` | 0.55 to 0.75 | another T0–T1 link flapping at 10 Hz |

The links, the host and the start times within each range come from the seed, so a rerun with
the same seed applies the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...errors import MrcError

LOSS_PERCENT = 1.0
FLAP_HZ = 10.0
CONTROLLER_DOWN_S = 0.5
SWITCHES_DOWN_S = 1.0
MIN_DURATION_S = 10.0
"""Below this the faults would overlap into one another's recoveries."""


@dataclass(frozen=True)
class Fault:
    """One scheduled fault.

    Attributes:
        kind: ``loss``, ``flap``, ``controller``, ``agent`` or ``switches``.
        start_s, end_s: seconds from the soak's start; a restart's ``end_s`` is its start plus
            the time it stays down.
        target: the link as ``(T0 switch, T1 switch)`` for ``loss`` and ``flap``, the host name
            for ``agent``, empty otherwise.
        value: the loss percent or the flap rate (Hz); the seconds down for a restart.
    """

    kind: str
    start_s: float
    end_s: float
    target: tuple[str, ...] = ()
    value: float = 0.0

    def describe(self) -> str:
        """One line for humans."""
        what = {"loss": f"{self.value:g} % loss on {'-'.join(self.target)}",
                "flap": f"{'-'.join(self.target)} flapping at {self.value:g} Hz",
                "controller": "controller SIGKILLed and restarted",
                "agent": f"agent of {self.target[0] if self.target else '?'} restarted",
                "switches": "P4Runtime server of every switch SIGKILLed and restarted"}[self.kind]
        return f"{self.start_s:6.2f}-{self.end_s:6.2f} s  {what}"


def make_schedule(seed: int, duration_s: float, spine_links: list[tuple[str, str]], hosts: list[str]) -> list[Fault]:
    """The soak's faults for ``seed`` (see the module docstring), ordered by start time.

    Args:
        seed: any integer.
        duration_s: the soak's length in seconds, at least :data:`MIN_DURATION_S`.
        spine_links: the fabric's T0–T1 links as (T0, T1) switch names, at least two.
        hosts: the fabric's host names, at least one.

    Raises:
        MrcError: a duration too short, or a fabric with fewer than two T0–T1 links or no host.
    """
    if duration_s < MIN_DURATION_S:
        raise MrcError(f"chaos duration {duration_s:g} s: use at least {MIN_DURATION_S:g} s")
    if len(spine_links) < 2 or not hosts:
        raise MrcError("chaos needs a fabric with two T0-T1 links and a host at least")
    rng = random.Random(seed)
    lossy, flapping = rng.sample(sorted(spine_links), 2)
    d = duration_s

    def at(lo: float, hi: float) -> float:
        return round(rng.uniform(lo, hi) * d, 3)

    t_ctl, t_agent, t_sw = at(0.15, 0.25), at(0.28, 0.38), at(0.42, 0.50)
    faults = [
        Fault("loss", round(0.10 * d, 3), round(0.90 * d, 3), lossy, LOSS_PERCENT),
        Fault("controller", t_ctl, t_ctl + CONTROLLER_DOWN_S, (), CONTROLLER_DOWN_S),
        Fault("agent", t_agent, t_agent, (rng.choice(sorted(hosts)),), 0.0),
        Fault("switches", t_sw, t_sw + SWITCHES_DOWN_S, (), SWITCHES_DOWN_S),
        Fault("flap", round(0.55 * d, 3), round(0.75 * d, 3), flapping, FLAP_HZ),
    ]
    return sorted(faults, key=lambda f: f.start_s)
