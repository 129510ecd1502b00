# SPDX-License-Identifier: Apache-2.0
# Type stubs of the C extension chash._chash (bindings/python/src/_chash.c).
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import TypedDict, Union

Key = Union[str, bytes, bytearray]
Node = Union[str, tuple[str, float]]

MAX_NODES: int
library_version: str

class Error(ValueError):
    """A libchash call failed; ``code`` is its status (a negative CH_E* value)."""
    code: int

class ConfigError(Error):
    """A config file or membership document was refused: ``file``, ``line``, ``column``."""
    file: str
    line: int
    column: int

class AlgorithmInfo(TypedDict):
    name: str
    weighted: bool
    max_weight: float | None
    fixed_hash: str | None
    address_ids: bool
    keyed: bool
    walk: bool
    whole_weights: bool
    consistent: bool
    limits: str | None

def algorithms() -> tuple[str, ...]: ...
def hashes() -> tuple[str, ...]: ...
def algorithm_info(name: str) -> AlgorithmInfo: ...

class Table:
    """An immutable placement table; safe to share between threads."""
    @property
    def nodes(self) -> tuple[str, ...]: ...
    @property
    def addresses(self) -> tuple[str, ...]: ...
    @property
    def names(self) -> tuple[str | None, ...]: ...
    @property
    def version(self) -> str | None: ...
    @property
    def pool(self) -> str | None: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def vnodes(self) -> int: ...
    @property
    def table_size(self) -> int: ...
    @property
    def points(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def weights(self) -> tuple[float, ...]: ...
    def __init__(
        self,
        nodes: Sequence[Node] | Mapping[str, float],
        algorithm: str = "ring",
        *,
        hash: str | None = None,
        vnodes: int | None = None,
        table_size: int | None = None,
        hash_tag: str | None = None,
    ) -> None: ...
    @classmethod
    def from_config(
        cls,
        path: str | bytes | PathLike[str],
        pool: str | None = None,
        *,
        algorithm: str | None = None,
        hash: str | None = None,
        vnodes: int | None = None,
        table_size: int | None = None,
    ) -> Table: ...
    @classmethod
    def from_membership(
        cls,
        document: str | bytes,
        name: str = "membership document",
        *,
        algorithm: str | None = None,
        hash: str | None = None,
        vnodes: int | None = None,
        table_size: int | None = None,
    ) -> tuple[Table, int]: ...
    def __len__(self) -> int: ...
    def lookup(self, key: Key, /) -> str: ...
    def index(self, key: Key, /) -> int: ...
    def address(self, key: Key, /) -> str: ...
    def key_hash(self, key: Key, /) -> int: ...
    def replicas(self, key: Key, r: int, /) -> list[str]: ...
    def replica_indexes(self, key: Key, r: int, /) -> list[int]: ...
    def lookup_many(self, keys: Iterable[str | bytes], /) -> list[str]: ...
    def index_many(self, keys: Iterable[str | bytes], /) -> list[int]: ...
    def shares(self) -> list[float]: ...
