"""Deep RL with Soft-MoE value networks (Obando-Ceron et al., ICML 2024): networks, environments, replay, DQN."""
