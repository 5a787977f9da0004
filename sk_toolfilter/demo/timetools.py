from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from semantic_kernel.functions import kernel_function


def _parse_date(value: str) -> date:
    return date.fromisoformat(value.strip())


class TimePlugin:
    """Dates, times and time zones."""

    @kernel_function(description="Get the current date and time in a time zone (default UTC).")
    def current_time(self, timezone: Annotated[str, "IANA time zone, e.g. Europe/Paris"] = "UTC") -> str:
        try:
            return datetime.now(ZoneInfo(timezone)).isoformat(timespec="seconds")
        except (ZoneInfoNotFoundError, ValueError):
            return f"unknown time zone {timezone!r}"

    @kernel_function(description="Get today's date.")
    def today(self) -> str:
        return date.today().isoformat()

    @kernel_function(description="Count the days between two dates (YYYY-MM-DD).")
    def days_between(self, start: Annotated[str, "First date"], end: Annotated[str, "Second date"]) -> str:
        try:
            return str((_parse_date(end) - _parse_date(start)).days)
        except ValueError as exc:
            return f"bad date: {exc}"

    @kernel_function(description="Add (or subtract, if negative) a number of days to a date.")
    def add_days(self, start: Annotated[str, "Date, YYYY-MM-DD"], days: Annotated[int, "Days to add"]) -> str:
        try:
            return (_parse_date(start) + timedelta(days=days)).isoformat()
        except ValueError as exc:
            return f"bad date: {exc}"

    @kernel_function(description="Tell which day of the week a date falls on.")
    def day_of_week(self, day: Annotated[str, "Date, YYYY-MM-DD"]) -> str:
        try:
            return _parse_date(day).strftime("%A")
        except ValueError as exc:
            return f"bad date: {exc}"

    @kernel_function(description="Convert a date and time from one time zone to another.")
    def convert_timezone(
        self,
        moment: Annotated[str, "Date and time, ISO format, e.g. 2024-05-01T09:00"],
        from_zone: Annotated[str, "IANA time zone of the input"],
        to_zone: Annotated[str, "IANA time zone to convert to"],
    ) -> str:
        try:
            parsed = datetime.fromisoformat(moment).replace(tzinfo=ZoneInfo(from_zone))
            return parsed.astimezone(ZoneInfo(to_zone)).isoformat(timespec="minutes")
        except (ValueError, ZoneInfoNotFoundError) as exc:
            return f"cannot convert: {exc}"

    @kernel_function(description="List the dates of every day in a month, e.g. to plan a schedule or calendar.")
    def month_calendar(self, year: Annotated[int, "Year"], month: Annotated[int, "Month, 1-12"]) -> str:
        if not 1 <= month <= 12:
            return "month must be 1-12"
        day, lines = date(year, month, 1), []
        while day.month == month:
            lines.append(f"{day.isoformat()} {day.strftime('%a')}")
            day += timedelta(days=1)
        return "\n".join(lines)
