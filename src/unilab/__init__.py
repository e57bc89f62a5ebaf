"""unilab: FastSAC humanoid training on CPU-parallel MuJoCo."""
__version__ = "0.1.0"
