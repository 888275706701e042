"""Presets of the golden attention + MoE datapath, built from one set of primitives.

- :mod:`golden.presets.deepseek_v4`: the published DeepSeek-V4 layer (checked against
  the reference implementation in Hugging Face transformers).
- :mod:`golden.presets.notes`: the design notes' tiered cache (project-defined where the
  notes are vague; decisions in ``docs/golden/notes-preset.md``).
- :mod:`golden.presets.tile`: the tiny presets of the integrated tile (a 3-layer
  ``deepseek-v4`` and a ``notes`` layer) and their decode positions.
"""
