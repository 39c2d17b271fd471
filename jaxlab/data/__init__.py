"""Data that needs no download: scikit-learn's digits, generated PDE data, JAX environments."""
