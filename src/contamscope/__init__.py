"""contamscope: has this model seen this benchmark's test set?"""

__version__ = "0.1.0"
__all__ = ["__version__"]
