"""Test and benchmark fixtures (not shipped): hand-built BMv2 programs, frames, waiting."""
