from __future__ import annotations

import ast
import math
import operator
import statistics
from collections.abc import Callable
from typing import Annotated

from semantic_kernel.functions import kernel_function

_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}

_UNITS = {  # to SI base units
    "m": 1.0,
    "km": 1000.0,
    "cm": 0.01,
    "mm": 0.001,
    "mi": 1609.344,
    "ft": 0.3048,
    "in": 0.0254,
    "kg": 1.0,
    "g": 0.001,
    "lb": 0.45359237,
    "oz": 0.028349523125,
    "l": 1.0,
    "ml": 0.001,
    "gal": 3.785411784,
}


MAX_EXPRESSION_CHARS = 200
MAX_MAGNITUDE = 1e100
"""Operands and results beyond this are refused: '9**9**9' would take hours and gigabytes."""


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return _bounded(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and left != 0 and right * math.log10(abs(left)) > math.log10(MAX_MAGNITUDE):
            raise ValueError("the result would be too large")
        return _bounded(_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / ** % are allowed")


def _bounded(value: float) -> float:
    if isinstance(value, complex):
        raise ValueError("complex results are not supported")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"numbers beyond {MAX_MAGNITUDE:g} are not supported")
    return value


def _numbers(values: str) -> list[float]:
    return [float(v) for v in values.replace(";", ",").split(",") if v.strip()]


class MathPlugin:
    """Arithmetic, statistics and unit conversion."""

    @kernel_function(description="Add two numbers.")
    def add(self, a: Annotated[float, "First number"], b: Annotated[float, "Second number"]) -> float:
        return a + b

    @kernel_function(description="Subtract the second number from the first.")
    def subtract(
        self, a: Annotated[float, "Number to subtract from"], b: Annotated[float, "Number to subtract"]
    ) -> float:
        return a - b

    @kernel_function(description="Multiply two numbers.")
    def multiply(self, a: Annotated[float, "First factor"], b: Annotated[float, "Second factor"]) -> float:
        return a * b

    @kernel_function(description="Divide the first number by the second.")
    def divide(self, a: Annotated[float, "Dividend"], b: Annotated[float, "Divisor, not zero"]) -> str:
        return "cannot divide by zero" if b == 0 else str(a / b)

    @kernel_function(description="Raise a number to a power (exponent).")
    def power(self, base: Annotated[float, "Base"], exponent: Annotated[float, "Exponent"]) -> float:
        return base**exponent

    @kernel_function(description="Compute the square root of a number.")
    def square_root(self, x: Annotated[float, "A non-negative number"]) -> str:
        return "no real square root of a negative number" if x < 0 else str(math.sqrt(x))

    @kernel_function(description="Compute what percentage one number is of another, or a percent of a value.")
    def percentage(self, part: Annotated[float, "The part"], whole: Annotated[float, "The whole"]) -> str:
        return "whole must not be zero" if whole == 0 else f"{100 * part / whole:.4g}%"

    @kernel_function(description="Compute the mean, median, minimum and maximum of a list of numbers.")
    def statistics_summary(self, values: Annotated[str, "Comma-separated numbers"]) -> str:
        numbers = _numbers(values)
        if not numbers:
            return "no numbers given"
        return (
            f"mean {statistics.fmean(numbers):.6g}, median {statistics.median(numbers):.6g}, "
            f"min {min(numbers):.6g}, max {max(numbers):.6g}"
        )

    @kernel_function(description="Evaluate an arithmetic expression such as '(3 + 4) * 2 ** 3' safely.")
    def calculate(self, expression: Annotated[str, "Arithmetic expression"]) -> str:
        if len(expression) > MAX_EXPRESSION_CHARS:
            return f"cannot evaluate: expressions are limited to {MAX_EXPRESSION_CHARS} characters"
        try:
            return str(_evaluate(ast.parse(expression, mode="eval")))
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as exc:
            return f"cannot evaluate: {exc}"

    @kernel_function(description="Convert a length, weight or volume between units (km, mi, kg, lb, l, gal…).")
    def convert_units(
        self,
        value: Annotated[float, "Amount to convert"],
        from_unit: Annotated[str, "Unit to convert from, e.g. km"],
        to_unit: Annotated[str, "Unit to convert to, e.g. mi"],
    ) -> str:
        source, target = from_unit.lower(), to_unit.lower()
        if source not in _UNITS or target not in _UNITS:
            return f"unknown unit; known: {', '.join(_UNITS)}"
        return f"{value * _UNITS[source] / _UNITS[target]:.6g} {to_unit}"

    @kernel_function(description="Convert a temperature between Celsius and Fahrenheit.")
    def convert_temperature(
        self, value: Annotated[float, "Temperature"], to_scale: Annotated[str, "'C' or 'F'"]
    ) -> str:
        if to_scale.upper().startswith("F"):
            return f"{value * 9 / 5 + 32:.4g} F"
        return f"{(value - 32) * 5 / 9:.4g} C"
