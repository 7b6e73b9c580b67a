"""Hypothesis profiles for the fuzz tests: small in CI, large with ``DSH_LONG_TESTS=1``.

The profiles are registered here and applied per test (``@fuzz(n)``), never loaded
globally, so the rest of the suite keeps its own settings.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.reliability.runs import LONG

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("dsh-ci", deadline=None, suppress_health_check=_QUIET, derandomize=False)
settings.register_profile(
    "dsh-long", deadline=None, suppress_health_check=_QUIET, derandomize=False
)
PROFILE = settings.get_profile("dsh-long" if LONG else "dsh-ci")
LONG_FACTOR = 20


def fuzz(examples: int) -> settings:
    """The profile with ``examples`` examples in CI, twenty times as many when long."""
    return settings(PROFILE, max_examples=examples * (LONG_FACTOR if LONG else 1))
