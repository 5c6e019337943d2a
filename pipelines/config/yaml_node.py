"""A job file's YAML nodes with the file and line they came from, read as the schema says: every
refusal names its line, unknown keys and missing required ones included."""

from __future__ import annotations

from typing import Any

import yaml

from pipelines.config.job_schema import Key
from pipelines.errors import ConfigError


class YamlNode:
    """A YAML node with the file it came from, for refusals that name the line."""

    def __init__(self, file: str, node: yaml.Node) -> None:
        self.file, self.node = file, node

    def where(self) -> str:
        return f"{self.file}:{self.node.start_mark.line + 1}"

    def refuse(self, reason: str) -> ConfigError:
        return ConfigError(f"{self.where()}: {reason}")

    def value(self) -> Any:
        return yaml.SafeLoader(yaml.safe_dump(None)).construct_object(self.node, deep=True)

    def mapping(self, what: str) -> dict[str, YamlNode]:
        if not isinstance(self.node, yaml.MappingNode):
            raise self.refuse(f"{what} must be a map")
        out: dict[str, YamlNode] = {}
        for key, val in self.node.value:
            name = str(YamlNode(self.file, key).value())
            if name in out:
                raise YamlNode(self.file, key).refuse(f"{what}: '{name}' appears twice")
            out[name] = YamlNode(self.file, val)
            out[name].key_node = key  # type: ignore[attr-defined]
        return out

    def string(self, what: str) -> str:
        """A scalar as written (a date or a number is kept as its text)."""
        bad_tags = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool")
        if not isinstance(self.node, yaml.ScalarNode) or self.node.tag in bad_tags or not self.node.value:
            raise self.refuse(f"{what} must be a non-empty string")
        return str(self.node.value)

    def strings(self, what: str) -> list[str]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.refuse(f"{what} must be a list")
        return [YamlNode(self.file, item).string(f"an item of {what}") for item in self.node.value]

    def boolean(self, what: str) -> bool:
        value = self.value()
        if not isinstance(value, bool):
            raise self.refuse(f"{what} must be true or false")
        return value

    def integer(self, what: str, minimum: int) -> int:
        value = self.value()
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.refuse(f"{what} must be an integer ≥ {minimum}")
        return value


def keyed(node: YamlNode, keys: tuple[Key, ...], what: str) -> dict[str, YamlNode]:
    """The map at `node`, refusing unknown keys (with their line) and missing required ones."""
    items = node.mapping(what)
    known = {k.name for k in keys}
    for name, item in items.items():
        if name not in known:
            line = YamlNode(node.file, item.key_node)  # type: ignore[attr-defined]
            raise line.refuse(f"unknown key '{name}' in {what} (the keys are: {', '.join(sorted(known))})")
    for key in keys:
        if key.required and key.name not in items:
            raise node.refuse(f"{what} needs '{key.name}' ({key.doc})")
    return items


def section(node: YamlNode | None, keys: tuple[Key, ...], what: str) -> dict[str, YamlNode]:
    """An optional map's keys (none where it is absent), each checked against `keys`."""
    return {} if node is None else keyed(node, keys, what)
