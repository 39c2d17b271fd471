"""PDE operator learning: DPOT (Hao et al., ICML 2024), AFNO Fourier attention, FNO, generated PDE data."""
