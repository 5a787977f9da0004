"""What every section of the ``tool_filtering`` block shares: strict validation, the search methods."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    SecretStr,
    ValidationInfo,
    field_validator,
)

from sk_toolfilter.basics.redaction import remember_connection, remember_secret


def _remembered(value: SecretStr) -> SecretStr:
    remember_secret(value.get_secret_value())
    return value


def _remembered_connection(value: SecretStr) -> SecretStr:
    remember_connection(value.get_secret_value())
    return value


RememberedSecret = Annotated[SecretStr, AfterValidator(_remembered)]
"""A secret setting (an API key): whatever gave it — a literal in an agent file, the environment,
code — its value is never rendered again (:mod:`sk_toolfilter.basics.redaction`)."""
RememberedConnection = Annotated[SecretStr, AfterValidator(_remembered_connection)]
"""A connection string: a URL's password and query (its host stays readable in messages), any other
form (``Server=…;Password=…``) whole, are never rendered again."""

SearchMethod = Literal["semantic", "bm25", "hybrid"]

RankingMethod = Literal["semantic", "bm25"]
DEFAULT_WEIGHTS: dict[RankingMethod, float] = {"semantic": 0.7, "bm25": 0.3}


def checked_weights(value: dict[RankingMethod, float]) -> dict[RankingMethod, float]:
    """Hybrid weights as configured: non-negative, the method left out at its default weight."""
    if any(w < 0 for w in value.values()):
        raise ValueError("weights must be >= 0")
    return {**DEFAULT_WEIGHTS, **value}


class StrictConfig(BaseModel):
    """Unknown keys, NaN / infinity, and booleans where a number belongs are errors."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _is_numeric(field.annotation) and _holds_bool(value):
            raise ValueError("expected a number, not true/false")
        return value


def _is_numeric(annotation: Any) -> bool:
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    return any(_is_numeric(arg) for arg in get_args(annotation))


def _holds_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(isinstance(v, bool) for v in value.values())
    return isinstance(value, list) and any(isinstance(v, bool) for v in value)
