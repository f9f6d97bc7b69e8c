"""The error every configuration problem raises: it names the offending field."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is invalid. `field` is a dotted path such as
    `profiles[0].pluginConfig[1].args.scoringStrategy.type`."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.detail = message
        super().__init__(f"{field}: {message}" if field else message)
