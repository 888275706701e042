"""Golden model of the attention and MoE datapath (float64 reference, numpy only).

- :mod:`golden.attn.primitives`: RMSNorm, RoPE, token-group compression, key-set builders,
  top-k with a fixed tie rule, the lightning-indexer score, masked and gathered attention.
- :mod:`golden.attn.hyper`: manifold-constrained hyper-connections (Sinkhorn mixing).
- :mod:`golden.moe`: routers, SwiGLU experts, MoE combine.
- :mod:`golden.presets`: the ``deepseek-v4`` and ``notes`` layers built from these.

See ``docs/golden/README.md``.
"""
