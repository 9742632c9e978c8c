"""Perturbations of benchmark items: option orders and prompt templates (seeded, pure)."""

from .orders import OrderSet, apply_order, option_orders
from .templates import TEMPLATES, PromptTemplate, get_template

__all__ = [
    "OrderSet",
    "option_orders",
    "apply_order",
    "PromptTemplate",
    "TEMPLATES",
    "get_template",
]
