"""Test fixtures (not shipped): hand-built BMv2 programs, an in-process fabric, waiting.

What benchmarks share with the tests (frames, the session simulators) lives in bench/."""
