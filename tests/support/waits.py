"""How long a test waits for something that, when sound, takes well under a second.

Such a bound only guards against a hang: it fails a test as "hung", never as "too
slow", so it is far beyond the real time even on a loaded machine (two CPU burners
beside the suite, its workers sharing two cores). No test asserts how long anything
took: figures and their targets live in bench/ (docs/benchmarks.md).
"""

from __future__ import annotations

HANG_S = 60.0
"""The longest any one wait of a test may last before the test fails as hung."""
