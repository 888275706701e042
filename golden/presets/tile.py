"""The tiny presets the integrated tile runs: a 3-layer ``deepseek-v4`` and a ``notes``
layer, small enough for simulation (every GEMM within the MA's 1..128), with every
mechanism of the full models engaged at their decode position.

- ``deepseek-v4``: layer 0 sliding window with the hash-routed MoE, layer 1 CSA with the
  lightning indexer (``index_topk`` = 12 of 16 visible entries at the decode position, so
  the top-k is wider than the VA's 8), layer 2 HCA; the decode position 63 completes a
  CSA group (rate 4) and an HCA group (rate 8).
- ``notes``: one layer whose tiers (SWA windows, HCA chunks, CSA range) are all
  non-empty at the decode position 28, which starts a refresh anchor (the HCA summaries
  are recomputed).
"""

from dataclasses import dataclass

from . import deepseek_v4 as dsv4
from . import notes

__all__ = ["TilePreset", "PRESETS", "DSV4_TILE", "NOTES_TILE"]

DSV4_TILE = dsv4.DeepseekV4Config(
    vocab_size=64, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
    head_dim=32, q_lora_rank=32, num_experts_per_tok=2, n_routed_experts=8,
    layer_types=[dsv4.SWA, dsv4.CSA, dsv4.HCA], mlp_layer_types=["hash_moe", "moe", "moe"],
    compress_rates={dsv4.CSA: 4, dsv4.HCA: 8}, partial_rotary_factor=0.5, sliding_window=8, o_groups=2,
    o_lora_rank=16, index_n_heads=2, index_head_dim=16, index_topk=12,
    rope_scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 16},
)

NOTES_TILE = notes.NotesConfig(
    vocab_size=64, hidden_size=64, num_hidden_layers=1, num_heads=4, num_kv_heads=2, head_dim=16,
    csa_window=8, hca_chunks=2, hca_chunk=4, swa_window=8, swa_overlap=2, refresh=4, mhc_chunk=16,
    n_experts=8, primary_topk=4, final_topk=2, moe_intermediate_size=32,
)


@dataclass(frozen=True)
class TilePreset:
    """A tile preset: ``kind`` ("deepseek-v4" or "notes"), its configuration, the
    position of the decode step the tile runs, and the seed of its random weights."""
    kind: str
    config: object
    position: int
    seed: int = 0

    def model(self):
        """The preset's model with its random weights."""
        if self.kind == "deepseek-v4":
            return dsv4.DeepseekV4Model(self.config, dsv4.random_weights(self.config, self.seed))
        return notes.NotesModel(self.config, notes.random_weights(self.config, self.seed))


PRESETS = {
    "deepseek-v4": TilePreset("deepseek-v4", DSV4_TILE, 63),
    "notes": TilePreset("notes", NOTES_TILE, 28),
}
