"""Mixture-of-experts layers: Soft MoE (Puigcerver et al., ICLR 2024) and a Top-1 MoE baseline."""
